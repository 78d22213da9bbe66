"""The driver's outstanding calls to role actors on Ray: waiting on them, and naming the role that failed.

A role that raises or dies ends the wait at once with a RoleFailed naming it. The stage decides
what to call (scheduler.py); this module only watches.
"""

import time
from typing import Any, Protocol

WAIT_S = 1.0  # how often the driver looks at its outstanding calls


class RoleFailed(RuntimeError):
    """A role actor raised or died; the message names it and carries its error."""


class Calls(Protocol):
    """What the stage needs of a watcher: RayCalls on Ray; the stage's in-process tests give their own."""

    def start(self, kind: str, refs: list) -> None: ...
    def wait(self, refs: list, timeout_s: float | None = None) -> list: ...
    def next_done(self) -> list[tuple[str, list]]: ...


class RayCalls:
    """Calls in flight, by kind (explore, train, ...); `actors` are pinged to find who died."""

    def __init__(self, actors: dict[str, Any]):
        self.actors = actors
        self.refs: dict[Any, str] = {}  # ref -> kind

    def start(self, kind: str, refs: list) -> None:
        """Track `refs` (one call per actor) as one call of `kind`; `next_done` reports it."""
        for ref in refs:
            self.refs[ref] = kind

    def wait(self, refs: list, timeout_s: float | None = None) -> list:
        """Wait for `refs` (a call made in turn); returns their results, or raises RoleFailed at once (TimeoutError
        when they are not all done within `timeout_s`)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pending = list(refs)
        while pending:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{len(pending)} of {len(refs)} calls still running after {timeout_s:g} s")
            _, pending = self._wait(pending, len(pending))
        return self._get(refs)

    def next_done(self) -> list[tuple[str, list]]:
        """Wait until some started kind has all its refs done; (kind, results) of each such kind."""
        while True:
            ready, _ = self._wait(list(self.refs), 1)  # the first to end: a kind may be done while another runs
            finished = []
            for kind in {self.refs[r] for r in ready}:
                mine = [r for r, k in self.refs.items() if k == kind]
                if all(r in ready or _done(r) for r in mine):
                    finished.append((kind, self._get(mine)))
                    for r in mine:
                        self.refs.pop(r)
            if finished:
                return finished

    def _wait(self, refs: list, num_returns: int) -> tuple[list, list]:
        import ray

        ready, pending = ray.wait(refs, num_returns=num_returns, timeout=WAIT_S)
        for ref in ready:
            self._get([ref])  # raises at once if that role failed
        return ready, pending

    def _get(self, refs: list) -> list:
        import ray

        try:
            return ray.get(refs)
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
            raise RoleFailed(self._who_failed(exc)) from None

    def _who_failed(self, exc: Exception) -> str:
        import ray

        pings = {name: actor.peak_rss_mb.remote() for name, actor in self.actors.items()}
        ready, _ = ray.wait(list(pings.values()), num_returns=len(pings), timeout=5)
        dead = [name for name, ref in pings.items() if ref not in ready or not _answers(ref)]
        cause = getattr(exc, "cause", None) or exc
        detail = str(cause).strip().splitlines()
        where = f"{', '.join(dead)} died" if dead else "a role failed"
        return f"{where}: {type(cause).__name__}: {detail[-1] if detail else ''}"


def _answers(ref: Any) -> bool:
    import ray

    try:
        ray.get(ref)
        return True
    except ray.exceptions.RayError:  # whatever stops an actor answering: it is the one to name
        return False


def _done(ref: Any) -> bool:
    import ray

    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)
