"""The explorer's runners (runner_per_model threads per engine) as Trinity-RFT's explorer keys shape them.

- `Timeouts`: how long a task may run (explorer.max_timeout, or with explorer.dynamic_timeout, `ratio` times the
  average time of the training tasks run so far once `warmup_min_steps` explore steps are done; Trinity-RFT's
  explorer/scheduler.py `dynamic_timeout`). A task is timed from the moment a runner starts it; evaluation tasks
  are timed out too but not counted in the average.
- `Board` and `Reporter`: what each runner runs and for how long, written to the explorer's log every
  explorer.runner_state_report_interval seconds (scheduler.py's runner state monitoring loop).
- `repeats`: how a runner plays the rollouts of a task whose workflow plays one (`can_repeat = False`), as
  explorer.concurrent_mode says (workflow_runner.py's sequential and multi-threading runs).
"""

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ...config.schema.explorer import DynamicTimeoutConfig
    from ..experience import Experience
    from ..workflows.base import Task

POLL_S = 0.5  # how often a wait looks again whether a queued task has started on its runner


class TaskCut(RuntimeError):
    """A task that ran past its timeout: its runner gives up on it, and its model client refuses further calls."""


class TaskFailed(RuntimeError):
    """A task that failed every retry."""


def is_engine_death(exc: Exception) -> bool:
    """Whether a workflow's error is its engine's death: not retried here, it fails the step, which the driver runs
    again once the engine is replaced (driver/replace.py)."""
    import ray

    return isinstance(exc, ray.exceptions.RayActorError)


class TaskLeftBehind(RuntimeError):
    """A task still going when its step's over-rollout grace ended: cut as a TaskCut is, but not a failure."""


class Timeouts:
    """The timeout of the next task to start, from the times of the training tasks run so far (thread-safe)."""

    def __init__(self, max_timeout: float, dynamic: "DynamicTimeoutConfig") -> None:
        self.max_timeout, self.dynamic = float(max_timeout), dynamic
        self.seconds, self.tasks, self.steps = 0.0, 0, 0
        self._lock = threading.Lock()

    def limit(self) -> float:
        """max_timeout until the dynamic timeout applies, then min(max_timeout, ratio x the average task time)."""
        with self._lock:
            if not self.dynamic.enable or self.steps < self.dynamic.warmup_min_steps or self.tasks == 0:
                return self.max_timeout
            return min(self.max_timeout, self.seconds / self.tasks * self.dynamic.ratio)

    def record(self, seconds: float) -> None:
        """A training task (one runner's part of it) ended, done, failed or cut, after `seconds` on its runner."""
        with self._lock:
            self.seconds += seconds
            self.tasks += 1

    def step_done(self) -> None:
        """An explore step's tasks all ended."""
        with self._lock:
            self.steps += 1

    def describe(self, limit: float) -> str:
        if limit < self.max_timeout:
            return (
                f"its dynamic timeout of {limit:.2f} s (explorer.dynamic_timeout: ratio {self.dynamic.ratio} x the "
                f"average task time so far)"
            )
        return f"explorer.max_timeout={self.max_timeout:g} s"


class Run:
    """One task (a runner's part of it) from submission to end: when its runner started it, and its limit."""

    def __init__(self, workflow_id: str, counted: bool) -> None:
        self.workflow_id, self.counted = workflow_id, counted
        self.started: float | None = None  # time.monotonic() when a runner took it
        self.ended: float | None = None
        self.limit = 0.0
        self.cut = threading.Event()  # set when it ran past its limit: its model client refuses further calls

    def begin(self, limit: float) -> None:
        self.limit, self.started = limit, time.monotonic()

    def end(self) -> None:
        self.ended = time.monotonic()

    def overdue(self, now: float) -> bool:
        """Whether it ran past its limit: still running at `now`, or ended after it."""
        return self.started is not None and (self.ended or now) - self.started > self.limit


class Quorum:
    """Trinity-RFT's over-rollout (explorer.over_rollout; its scheduler.py `_wait_for_batch_results`): once `least` of
    a step's tasks have ended (done or failed), the others get `grace` seconds more; then every run still going is
    left behind (cut: its model client refuses further calls, so its runner is free)."""

    def __init__(self, tasks: list[list[tuple["Future", Run]]], least: int, grace: float) -> None:
        self.least, self.grace = least, grace
        self.runs = [run for parts in tasks for _, run in parts]
        self.deadline: float | None = None  # time.monotonic() when the tasks still going are left behind
        self._lock = threading.Lock()
        self._going = [len(parts) for parts in tasks]  # each task's runs not ended
        self._ended = 0
        for task, parts in enumerate(tasks):
            for future, _ in parts:
                future.add_done_callback(lambda _, task=task: self._ran(task))

    def _ran(self, task: int) -> None:
        with self._lock:
            self._going[task] -= 1
            if self._going[task] == 0:
                self._ended += 1
                if self._ended == self.least:
                    self.deadline = time.monotonic() + self.grace

    def passed(self, now: float) -> bool:
        """Whether the grace after the quorum is over: every run not ended is then cut."""
        if self.deadline is None or now < self.deadline:
            return False
        for run in self.runs:
            if run.ended is None:
                run.cut.set()
        return True


def wait(
    future: "Future",
    run: Run,
    most: float,
    timeouts: Timeouts,
    others: Iterable[Run] = (),
    quorum: Quorum | None = None,
) -> Any:
    """The future's result, if its task ended within its limit (counted from the moment its runner took it); else
    TaskCut, as when `most` seconds were waited for a task that never started, or TaskLeftBehind where it was still
    going when the `quorum`'s grace ended. While it waits, every run of `others` past its limit is cut too (its model
    client refuses further calls at once, not when its turn to be waited for comes). A counted task's time on its
    runner goes to `timeouts` (a cut one's: its limit; one left behind: none)."""
    others = [r for r in others if r is not run]
    give_up = time.monotonic() + most
    while True:
        now = time.monotonic()
        for other in others:
            if not other.cut.is_set() and other.overdue(now):
                other.cut.set()
        if quorum is not None and quorum.passed(now):
            _behind(run, quorum)
        deadline = give_up if run.started is None else min(give_up, run.started + run.limit)
        try:
            result = future.result(timeout=max(0.0, min(POLL_S, deadline - now)))
        except FutureTimeout:
            if time.monotonic() < deadline:
                continue
            return _cut(run, most, timeouts)
        except BaseException:
            _behind(run, quorum)
            if run.cut.is_set() or run.overdue(time.monotonic()):
                return _cut(run, most, timeouts)
            _count(run, timeouts)
            raise
        _behind(run, quorum)
        if run.cut.is_set() or run.overdue(time.monotonic()):
            return _cut(run, most, timeouts)
        _count(run, timeouts)
        return result


def _behind(run: Run, quorum: Quorum | None) -> None:
    """TaskLeftBehind where `run` had not ended when the quorum's grace did."""
    if quorum is not None and quorum.deadline is not None and (run.ended or time.monotonic()) > quorum.deadline:
        run.cut.set()
        raise TaskLeftBehind(
            f"task {run.workflow_id} was left behind {quorum.grace:g} s after {quorum.least} tasks of its step ended "
            "(explorer.over_rollout)"
        )


def _cut(run: Run, most: float, timeouts: Timeouts) -> NoReturn:
    run.cut.set()
    if run.started is None:
        raise TaskCut(f"task {run.workflow_id} waited {most:g} s for a runner and never started")
    if run.counted:
        timeouts.record(run.limit)
    raise TaskCut(f"task {run.workflow_id} ran past {timeouts.describe(run.limit)}")


def _count(run: Run, timeouts: Timeouts) -> None:
    if run.counted and run.started is not None:
        timeouts.record((run.ended or time.monotonic()) - run.started)


class Board:
    """What each runner (engine lane x runner_per_model) runs: Trinity-RFT's runner state, one row a runner."""

    COLUMNS = ("runner_id", "engine", "workflow_id", "state", "begin_time", "terminate_time", "running_time")

    def __init__(self, lanes: int, slots: int) -> None:
        self.lanes, self.slots = lanes, slots
        self._ids: dict[str, int] = {}  # a runner thread's name -> its runner id
        self._rows: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def begin(self, lane: int, workflow_id: str) -> None:
        """The calling runner thread (of engine `lane`) starts task `workflow_id` (batch/task/first run)."""
        with self._lock:
            rid = self._runner(lane)
            self._rows[rid] = {"engine": lane, "workflow_id": workflow_id, "begin": time.time(), "end": None}

    def end(self, lane: int) -> None:
        with self._lock:
            row = self._rows.get(self._runner(lane))
            if row is not None:
                row["end"] = time.time()

    def _runner(self, lane: int) -> int:
        name = threading.current_thread().name
        if name not in self._ids:
            taken = sum(1 for n in self._ids if n.startswith(f"runner{lane}_"))
            self._ids[name] = lane * self.slots + taken
        return self._ids[name]

    def states(self, now: float | None = None) -> list[dict[str, Any]]:
        """Every runner's state: its task, running or done, since when, and how long it ran (runs, if running)."""
        now = time.time() if now is None else now
        out = []
        with self._lock:
            for rid in range(self.lanes * self.slots):
                row = self._rows.get(rid)
                if row is None:
                    out.append({"runner_id": rid, "engine": rid // self.slots, "state": "idle"})
                    continue
                end = row["end"]
                out.append(
                    {
                        "runner_id": rid,
                        "engine": row["engine"],
                        "workflow_id": row["workflow_id"],
                        "state": "running" if end is None else "done",
                        "begin_time": _clock(row["begin"]),
                        "terminate_time": _clock(end) if end is not None else "-",
                        "running_time": f"{(end or now) - row['begin']:.1f}s",
                    }
                )
        return out

    def table(self, now: float | None = None) -> list[str]:
        """The states as an aligned table: a header line, a rule, a line a runner."""
        rows = [[str(s.get(c, "-")) for c in self.COLUMNS] for s in self.states(now)]
        widths = [max(len(x) for x in col) for col in zip(self.COLUMNS, *rows)]
        lines = [" | ".join(c.ljust(w) for c, w in zip(self.COLUMNS, widths)), "-+-".join("-" * w for w in widths)]
        return lines + [" | ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


class Reporter:
    """Writes the board to `log` every `interval` seconds, on a daemon thread, until `stop`."""

    def __init__(self, board: Board, interval: float, log: logging.Logger) -> None:
        self.board, self.interval, self.log = board, interval, log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="runner-state-report", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.log.info("runner state (explorer.runner_state_report_interval=%gs):", self.interval)
                for line in self.board.table():
                    self.log.info("%s", line)
            except Exception:  # a report must never stop the explorer
                self.log.exception("runner state report failed")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def repeats(mode: str, task: "Task", play: Callable[["Task"], list["Experience"]]) -> list["Experience"]:
    """The experiences of `task`'s repeat_times rollouts by a workflow that plays one (`play` runs one on a task of
    repeat_times 1), as explorer.concurrent_mode says: sequential, one after another, stopping at the first that
    fails; multi-threading, each on a thread of its own, at once. In run order; the first error is raised."""
    one = replace(task, repeat_times=1)
    if mode == "sequential" or task.repeat_times == 1:
        return [exp for _ in range(task.repeat_times) for exp in play(one)]
    if mode != "multi-threading":
        raise ValueError(f"explorer.concurrent_mode {mode!r} is not run by this version of trinity")
    with ThreadPoolExecutor(task.repeat_times, thread_name_prefix=f"{threading.current_thread().name}-run") as pool:
        futures = [pool.submit(play, one) for _ in range(task.repeat_times)]
        return [exp for f in futures for exp in f.result()]
