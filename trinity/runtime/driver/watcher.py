"""The driver's outstanding calls to role actors on Ray: waiting on them, and naming the role that failed.

A role that raises or dies ends the wait at once with a RoleFailed naming it and its cause: what it raised
(the type and the message's meaningful lines, without a device runtime's boilerplate), or, when its process
died, how and the last lines of its log (where its stderr goes: a device runtime's own message), with the
log's path. Free text is shown as is: trinity has no masking helper for it (config/redact.py masks config
trees and overrides). The stage decides what to call (scheduler.py); this module only watches.
"""

import re
import time
from pathlib import Path
from typing import Any, Protocol

from ..roles.base import found_log

WAIT_S = 1.0  # how often the driver looks at its outstanding calls
CAUSE_LINES = 3  # of an error's message, shown
TAIL_LINES = 5  # of a dead role's log, shown
LINE_CHARS = 240  # longer lines are cut
MAX_LINES = 15  # of a RoleFailed message
# lines a device runtime adds to every error of its kind: the cause is on another line
BOILERPLATE = re.compile(
    "|".join(
        (
            r"CUDA kernel errors might be asynchronously reported",
            r"For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            r"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions",
            r"Device-side assertions were explicitly omitted",
            r"Search for `cuda\w+' in https://docs\.nvidia\.com/",
            r"Exception raised from .* \(most recent call first\)",
            r"frame #\d+: ",
            r"Since the operator is called asynchronously, the stacktrace may be inaccurate",
            r"Note: ASCEND_LAUNCH_BLOCKING=1 will force ops to run in synchronous mode",
            r"\bERR\d+ PTA call acl api failed",
        )
    )
)
# the stacks a fatal signal leaves besides its one line ("Fatal Python error: Segmentation fault"): faulthandler's, and
# the frames Ray's own handler writes first; they stay in the log
STACK_DUMP = re.compile(
    r'^\s+File "|^\s+<no Python frame>|^(Current thread|Thread) 0x[0-9a-f]+ |^Extension modules: '
    r"|@\s+0x[0-9a-f]+\s"
)


class RoleFailed(RuntimeError):
    """A role actor raised or died; the message names it and carries its error."""


class Watcher(Protocol):
    """What the stage needs of a watcher: RayWatcher on Ray; the stage's in-process tests give their own."""

    def start(self, kind: str, refs: list) -> None: ...
    def wait(self, refs: list, timeout_s: float | None = None) -> list: ...
    def next_done(self) -> list[tuple[str, list]]: ...


class RayWatcher:
    """Calls in flight, by kind (explore, train, ...). A failure names the actor (of `actors`, by name) it came from,
    and the others found dead; `log_dir`, the run's `logs` folder, holds their logs."""

    def __init__(self, actors: dict[str, Any], log_dir: str | Path | None = None):
        self.actors, self.log_dir = actors, log_dir
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

        ids = {actor._actor_id.hex(): name for name, actor in self.actors.items()}  # a handle has no public id
        name, error = _origin(exc, ids)
        if isinstance(error, ray.exceptions.RayTaskError) or name is None:
            lines = self._raised(name, getattr(error, "cause", None) or error)
        else:
            lines = self._died(name, error)
        for other in self._dead():
            if other != name:
                lines += [f"{other} died too", *self._where(other, "log")]
        return "\n".join(lines[:MAX_LINES])

    def _raised(self, name: str | None, cause: BaseException) -> list[str]:
        first, *more = cause_of(cause)
        return [f"{name or 'a role'} failed: {first}", *(f"  {line}" for line in more), *self._where(name, "traceback")]

    def _died(self, name: str, error: Exception) -> list[str]:
        tail = _tail(found_log(self.log_dir, name)) if self.log_dir else []
        told = ["  its log ends:", *(f"    {line}" for line in tail)] if tail else []
        return [f"{name} died: {_how(str(error))}", *told, *self._where(name, "log")]

    def _where(self, name: str | None, what: str) -> list[str]:
        return [f"  {what}: {found_log(self.log_dir, name)}"] if name and self.log_dir else []

    def _dead(self) -> list[str]:
        """The roles whose process has ended: asked something, Ray answers that they died (a role busy elsewhere
        does not answer in time, and is not named)."""
        import ray

        pings = {name: actor.peak_rss_mb.remote() for name, actor in self.actors.items()}
        ready, _ = ray.wait(list(pings.values()), num_returns=len(pings), timeout=5)
        return [name for name, ref in pings.items() if ref in ready and not _answers(ref)]


def _origin(exc: Exception, ids: dict[str, str]) -> tuple[str | None, Exception]:
    """The innermost error of `exc`'s chain that came from one of our actors (`ids`: actor id -> name), and its name:
    an explorer that failed because an engine died names the engine. (None, exc) when none did."""
    import ray

    found: tuple[str | None, Exception] = (None, exc)
    error: Any = exc
    while isinstance(error, ray.exceptions.RayError):
        if isinstance(error, ray.exceptions.RayTaskError):  # the id is in its first line; the dual class hides it
            match = re.search(r"actor_id=([0-9a-f]+)", str(error).partition("\n")[0])
            actor = match.group(1) if match else None
        else:
            actor = getattr(error, "actor_id", None)
        if actor in ids:
            found = (ids[actor], error)
        error = getattr(error, "cause", None)
    return found


def cause_of(error: BaseException) -> list[str]:
    """What `error` says, in at most CAUSE_LINES lines: its type and its message's meaningful lines (a CUDA error's
    cause is its first line, the boilerplate after it is left out)."""
    message = _meaningful(str(error).splitlines())[:CAUSE_LINES]
    first = type(error).__name__ + (f": {message[0]}" if message else "")
    return [first, *message[1:]]


def _meaningful(lines: list[str]) -> list[str]:
    """`lines` without blanks and a device runtime's boilerplate, each cut to LINE_CHARS."""
    return [_cut(line.strip()) for line in lines if line.strip() and not BOILERPLATE.search(line)]


def _how(message: str) -> str:
    """How Ray says the actor's process ended: the first sentence of its exit detail, else its message's last line."""
    detail = re.search(r"Worker exit detail: (.+?\.)(?=\s|$)", message)
    lines = _meaningful(message.splitlines())
    return _cut(detail.group(1)) if detail else (lines[-1] if lines else "its process ended")


def _tail(path: Path) -> list[str]:
    """The last meaningful lines of a role's log: what its process wrote last (a device runtime's message, a fatal
    signal), without faulthandler's stacks. [] when the log is not on this machine."""
    try:
        with path.open("rb") as log:
            log.seek(max(0, log.seek(0, 2) - 64 * 1024))
            text = log.read().decode(errors="replace")
    except OSError:
        return []
    lines = [line for line in text.splitlines() if not STACK_DUMP.search(line)]
    return _meaningful(lines)[-TAIL_LINES:]


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


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
