"""The driver's outstanding calls to role actors on Ray: waiting on them, and naming the role whose failure ended them.

A role that raises or dies ends the wait with a RoleFailed whose first line names the cause: the calls still out and
a call on each actor are watched for SETTLE_S more (a peer that lost its connection to a killed role often reports
first), and blame.py orders what failed: a death first, with how its process ended (the signal or exit code its
sentinel wrote into its log, roles/sentinel.py, else what Ray says) and the last lines of its log (where its stderr
goes: a device runtime's own message), else what a role raised (the type and the message's meaningful lines, without
a device runtime's boilerplate); the others follow, one line each ("then: ..."). Free text is shown as is: trinity
has no masking helper for it (config/redact.py masks config trees and overrides). The stage decides what to call
(scheduler.py); this module only watches.
"""

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..roles import sentinel
from ..roles.base import found_log
from . import blame
from .blame import Failure

WAIT_S = 1.0  # how often the driver looks at its outstanding calls
CAUSE_LINES = 3  # of an error's message, shown
TAIL_LINES = 5  # of a dead role's log, shown
LINE_CHARS = 240  # longer lines are cut
MAX_LINES = 15  # of a RoleFailed message
SETTLE_S = 0.5  # after a first failure, how long the others are gathered: the cause is not always the first seen
CAUSE_WAIT_S = 2.0  # ... and at most, while every failure found says only that it lost a peer
SENTINEL_WAIT_S = 0.5  # for a dead role's sentinel to write how it ended (milliseconds after the death)
# Ray's words for a process that ended without a word to it: a signal or an exit code, which its sentinel gives
GENERIC_EXIT = re.compile(r"Worker unexpectedly exits with a connection error code")
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
    """A role actor raised or died; the message names the cause first and its consequences after it (blame.py)."""

    def __init__(self, message: str, failures: tuple[Failure, ...] = (), not_restarted: str = ""):
        super().__init__(message)
        self.failures = failures  # the cause first; none where the failure is not a role's (a misplaced actor)
        self.not_restarted = not_restarted  # why the run did not restart past it (driver/stage_restart.py)

    @classmethod
    def of(cls, failures: list[Failure]) -> "RoleFailed":
        """The failure of `failures`, worded and ordered by blame.py, in at most MAX_LINES lines."""
        lines = blame.message(failures).splitlines()
        return cls("\n".join(lines[:MAX_LINES]), tuple(blame.ordered(failures)))

    def refused(self, why: str) -> "RoleFailed":
        """This failure, saying under its first line `why` the run was not restarted past it."""
        first, _, rest = str(self).partition("\n")
        return RoleFailed("\n".join(filter(None, (first, f"not restarted: {why}", rest))), self.failures, why)

    def record(self) -> dict:
        """What the run's records keep of it (blame.record); a failure that is no role's: its message's first line."""
        kept = blame.record(list(self.failures)) if self.failures else {"cause": str(self).partition("\n")[0]}
        return kept | ({"not_restarted": self.not_restarted} if self.not_restarted else {})


class Watcher(Protocol):
    """What the stage needs of a watcher: RayWatcher on Ray; the stage's in-process tests give their own."""

    def start(self, kind: str, refs: list) -> None: ...
    def wait(self, refs: list, timeout_s: float | None = None) -> list: ...
    def next_done(self) -> list[tuple[str, list]]: ...


class RayWatcher:
    """Calls in flight, by kind (explore, train, ...). A failure names the actor (of `actors`, by name) it came from,
    and the others found failed or dead within SETTLE_S; `log_dir`, the run's `logs` folder, holds their logs."""

    def __init__(self, actors: dict[str, Any], log_dir: str | Path | None = None):
        self.actors, self.log_dir = actors, log_dir
        self.refs: dict[Any, str] = {}  # ref -> kind
        self.on_poll: Callable[[], None] | None = None  # called between waits (the engines' health check: health.py)

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

    def forget(self, kind: str) -> list:
        """Stop watching the calls of `kind` (a step to run again after a role was replaced); returns their refs."""
        mine = [r for r, k in self.refs.items() if k == kind]
        for ref in mine:
            self.refs.pop(ref)
        return mine

    def settle(self, kind: str) -> tuple[list, list | None]:
        """Stop watching the calls of `kind` once every one has ended: their refs, and their results (None where one
        failed: the caller knows why, a role it replaces)."""
        import ray

        refs = self.forget(kind)
        ray.wait(refs, num_returns=len(refs))
        try:
            return refs, ray.get(refs)
        except ray.exceptions.RayError:
            return refs, None

    def _wait(self, refs: list, num_returns: int) -> tuple[list, list]:
        import ray

        if self.on_poll is not None:
            self.on_poll()
        ready, pending = ray.wait(refs, num_returns=num_returns, timeout=WAIT_S)
        for ref in ready:
            self._get([ref], pending)  # raises at once if that role failed
        return ready, pending

    def _get(self, refs: list, others: list | None = None) -> list:
        """The results of `refs`; where one failed, RoleFailed naming the cause among what failed with it (of `refs`,
        `others` and every call started: the stage ends with the first failure, so each is one of its own)."""
        import ray

        try:
            return ray.get(refs)
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
            seen = time.time()
            caught = [(exc, None, seen), *self._settle([*refs, *(others or []), *self.refs], exc)]
            raise RoleFailed.of([self._failure(error, pinged, at) for error, pinged, at in caught]) from None

    def _settle(self, calls: list, first: Exception) -> list[tuple[Exception, str | None, float]]:
        """What else fails within SETTLE_S of the first failure (`first`), among `calls` and a call on each actor (one
        that died answers with its death): a peer's error that it lost the role that failed can come first. While
        every failure found only says it lost a peer, the cause is still to come: up to CAUSE_WAIT_S.
        (error, the actor called where a call on it found its death, when) of each."""
        import ray

        watched: dict[Any, str | None] = {ref: None for ref in dict.fromkeys(calls)}
        watched |= {actor.peak_rss_mb.remote(): name for name, actor in self.actors.items()}
        started, caught = time.monotonic(), []
        while watched:
            causes = [first, *(error for error, _, _ in caught)]
            left = (SETTLE_S if any(map(self._is_cause, causes)) else CAUSE_WAIT_S) - (time.monotonic() - started)
            if left <= 0:
                break
            ready, _ = ray.wait(list(watched), num_returns=1, timeout=left)
            for ref in ready:
                pinged = watched.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as error:
                    caught.append((error, pinged, time.time()))
        return caught

    def _is_cause(self, error: Exception) -> bool:
        """Whether `error` is a death or an error of a role's own (not one saying it lost a peer)."""
        import ray

        _, origin = _origin(error, self._ids())
        if not isinstance(origin, ray.exceptions.RayTaskError):
            return isinstance(origin, ray.exceptions.RayActorError)
        return not blame.PEER_LOST.search(cause_of(getattr(origin, "cause", None) or origin)[0])

    def _ids(self) -> dict[str, str]:
        return {actor._actor_id.hex(): name for name, actor in self.actors.items()}  # a handle has no public id

    def _failure(self, error: Exception, pinged: str | None, seen: float) -> Failure:
        """The Failure record of `error` (raised by a call, or by a call on actor `pinged`), seen at `seen`."""
        import ray

        name, origin = _origin(error, self._ids())
        name = name or pinged
        if isinstance(origin, ray.exceptions.RayTaskError) or name is None:
            first, *more = cause_of(getattr(origin, "cause", None) or origin)
            shown = (*(f"  {line}" for line in more), *self._where(name, "traceback"))
            return Failure(name, False, first, seen, shown, self._log(name))
        return self._death(name, origin, seen)

    def _death(self, name: str, error: Exception, seen: float) -> Failure:
        """Role `name` died: how (its sentinel's words, else Ray's), when, and the end of its log."""
        pid = _pid(str(error))
        lines = self._ended_lines(name, pid)
        said = sentinel.ended(lines, pid) if pid else None
        itself = sentinel.ends_itself(lines, pid) if pid else None
        ray_says = _how(str(error))
        how = (said[0] if said else ray_says) + (f" (it ended itself: {itself})" if itself else "")
        if said and not GENERIC_EXIT.match(ray_says):
            how += f"; Ray: {ray_says}"
        tail = _tail(lines)
        told = ("  its log ends:", *(f"    {line}" for line in tail)) if tail else ()
        return Failure(name, True, how, said[1] if said else seen, (*told, *self._where(name, "log")), self._log(name))

    def _ended_lines(self, name: str, pid: int | None) -> list[str]:
        """The last lines of role `name`'s log, once its sentinel wrote how process `pid` ended (at most
        SENTINEL_WAIT_S: the line follows the death by milliseconds); [] when the log is not on this machine."""
        path = found_log(self.log_dir, name) if self.log_dir else None
        deadline = time.monotonic() + SENTINEL_WAIT_S
        while True:
            lines = _last_lines(path) if path else []
            if not (path and path.exists() and pid) or sentinel.ended(lines, pid) or time.monotonic() >= deadline:
                return lines
            time.sleep(0.05)

    def _log(self, name: str | None) -> str | None:
        return str(found_log(self.log_dir, name)) if name and self.log_dir else None

    def _where(self, name: str | None, what: str) -> list[str]:
        return [f"  {what}: {found_log(self.log_dir, name)}"] if name and self.log_dir else []


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


def _pid(message: str) -> int | None:
    """The process id Ray names in an actor's death (`pid: 1234`)."""
    found = re.search(r"\bpid[:=] ?(\d+)", message)
    return int(found.group(1)) if found else None


def _last_lines(path: Path) -> list[str]:
    """The lines of the last 64 KiB of a role's log; [] when the log is not on this machine."""
    try:
        with path.open("rb") as log:
            log.seek(max(0, log.seek(0, 2) - 64 * 1024))
            return log.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def _tail(lines: list[str]) -> list[str]:
    """The last meaningful lines of a role's log: what its process wrote last (a device runtime's message, a fatal
    signal), without faulthandler's stacks and its sentinel's line (the death's headline says it)."""
    kept = [line for line in lines if not STACK_DUMP.search(line) and not sentinel.ENDED_LINE.match(line.strip())]
    return _meaningful(kept)[-TAIL_LINES:]


def _cut(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def _done(ref: Any) -> bool:
    import ray

    ready, _ = ray.wait([ref], timeout=0)
    return bool(ready)
