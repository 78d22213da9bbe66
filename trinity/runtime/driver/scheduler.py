"""Which job a stage that explores and trains makes next, given what has finished: no Ray, no actors.

The stage asks `next_jobs()`, starts what it returns, and tells `finished()` when a job is done.
Explore and train steps run beside each other (unless the mode shares the devices); a sync runs
when neither is running (under fully_async, beside explore steps: up to `policy.inflight` of them run at
once), an evaluation beside a train step (never one that shares its devices).
The numbers follow `SyncPolicy` (sync_policy.py): train step t learns from explore step t's
experiences, and version v is the weights after train step v.
"""

import copy
from dataclasses import dataclass, field

from .sync_policy import SyncPolicy

EXPLORE, TRAIN, SYNC, EVALUATE = "explore", "train", "sync", "evaluate"


class Stalled(RuntimeError):
    """No job can start and none is running: the stage would wait forever."""


@dataclass(frozen=True)
class Job:
    """One job to run: an explore or train step, a sync to version `step`, or an evaluation of version `step`."""

    kind: str
    step: int

    @property
    def key(self) -> str:
        """What names this job among those running (explore steps may run several at once)."""
        return f"{self.kind} {self.step}"


@dataclass
class Scheduler:
    """The explore/train/sync/evaluate order of one stage (steps counted within the stage)."""

    policy: SyncPolicy
    total: int
    done: int = 0  # steps a resumed checkpoint already did
    shared: bool = False  # explore and train take turns on the same devices (colocate)
    batch_size: int = 1  # experiences one train step takes
    eval_interval: int = 0  # evaluate after every eval_interval-th explore step (0: only at the end)
    sync_first: bool = False  # the engines hold older weights than the trainer (a resume without HF weights)
    eval_first: bool = False  # explorer.eval_on_startup
    waiting: int = 0  # experiences in the buffer before the first explore step (a resumed stage's kept ones)
    explored: int = field(init=False)
    trained: int = field(init=False)
    engine_version: int = field(init=False)
    running: dict[str, Job] = field(default_factory=dict, init=False)  # Job.key -> the job, of those now running
    started_explore: int = field(init=False)  # the last explore step started
    gathered: int = field(default=0, init=False)  # experiences this stage's explore steps wrote, and `waiting`
    _last_asked: int = field(init=False)
    _queued: list[Job] = field(default_factory=list, init=False)  # syncs and evaluations, run in order
    _again: list[int] = field(default_factory=list, init=False)  # explore steps to run again (`retry`), in order
    _closing: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.explored = self.trained = self.engine_version = self._last_asked = self.started_explore = self.done
        self.gathered = self.waiting
        if self.sync_first:
            self._queued.append(Job(SYNC, self.done))
        if self.eval_first:
            self._queued.append(Job(EVALUATE, self.done))

    @property
    def finished_all(self) -> bool:
        """Every step trained, the engines hold the last weights, and the final evaluation ran."""
        return self._closing and not self._queued and not self.running

    @property
    def buffered(self) -> int:
        """Experiences in the buffer (`waiting`, and what this stage's explore steps wrote) that its train steps have
        not taken yet."""
        return self.gathered - (self.trained - self.done) * self.batch_size

    def next_jobs(self) -> list[Job]:
        """The jobs to start now: one that runs alone, or explore and/or train steps; [] means wait."""
        if self._queued:  # queued when nothing runs, or as an explore step ends: an evaluation may run beside training
            return [self._queued.pop(0)]
        if self.trained >= self.total:
            return self._close()
        if self.policy.sync_due(
            self.trained, self.engine_version, self.explored, self._last_asked, self.explored >= self.total
        ):
            return [Job(SYNC, self.trained)] if not self._holds_sync() else []
        jobs = self._explores()
        train = self._train()
        if train and not (self.shared and jobs):  # one holder of the devices at a time: rollout first
            jobs.append(train)
        if not jobs and not self.running:
            raise Stalled(self._stalled())
        return jobs

    def syncs_after(self, job: Job) -> bool:
        """Whether, once train step `job` (just started) is done, a sync comes before any explore step or evaluation,
        maybe after more train steps (False for any other job). Where the devices are shared nothing runs beside a
        train step, so what follows is known as it starts: the order is played ahead on a copy."""
        if job.kind != TRAIN:
            return False
        ahead = copy.deepcopy(self)
        ahead.finished(job)
        while True:
            try:
                following = ahead.next_jobs()
            except Stalled:
                return False
            if not following or following[0].kind != TRAIN:
                return bool(following) and following[0].kind == SYNC
            ahead.started(following[0])
            ahead.finished(following[0])

    def started(self, job: Job) -> None:
        """`job` is now running (or, for a sync or an evaluation, being waited on)."""
        self.running[job.key] = job
        if job.kind == EXPLORE:
            self.started_explore = max(self.started_explore, job.step)
            self._again = [step for step in self._again if step != job.step]

    def retry(self, job: Job) -> None:
        """`job` failed with a role that was then replaced (driver/replace.py): it is no longer running, and an explore
        step (which wrote nothing) or an evaluation runs again before what would come next. A sync is not queued:
        the replacement's own sync moves the trainer's weights. A train step is never retried here."""
        self.running.pop(job.key, None)
        if job.kind == EXPLORE:
            self._again = sorted({*self._again, job.step})
        elif job.kind == EVALUATE:
            self._queued.insert(0, job)
        elif job.kind == TRAIN:
            raise ValueError(f"{job.key} is not retried: a failed train step is the trainer's")

    def finished(self, job: Job, experiences: int = 0) -> None:
        """`job` is done; an explore step reports how many experiences it wrote."""
        self.running.pop(job.key, None)
        if job.kind == EXPLORE:
            self.explored += 1
            self.gathered += experiences
            if self.eval_interval and self.explored % self.eval_interval == 0 and self.explored < self.total:
                self._queued.append(Job(EVALUATE, self.engine_version))
        elif job.kind == TRAIN:
            self.trained += 1
        elif job.kind == SYNC:
            self.engine_version, self._last_asked = job.step, self.explored

    def runs(self, kind: str) -> int:
        """How many jobs of `kind` run now."""
        return sum(job.kind == kind for job in self.running.values())

    def _holds_sync(self) -> bool:
        """Whether what runs keeps a sync waiting: anything, or under fully_async a train step (the trainer's weights
        must be whole; the engines take them between generation calls)."""
        return bool(self.runs(TRAIN)) if self.policy.overlaps_syncs else bool(self.running)

    def _explores(self) -> list[Job]:
        """The explore steps that may start now: one at a time, or under fully_async up to `policy.inflight`."""
        jobs: list[Job] = []
        while job := self._explore(len(jobs)):
            jobs.append(job)
        return jobs

    def _explore(self, asked: int) -> Job | None:
        """The next explore step, `asked` steps past those started, if it may start now."""
        blocked = self.runs(EXPLORE) + asked >= self.policy.inflight or (self.shared and self.runs(TRAIN))
        again = len(self._again)  # steps to run again come first
        step = self._again[asked] if asked < again else self.started_explore + asked - again + 1
        may = self.policy.may_explore(step, self.engine_version, self.trained) or self._short(asked)
        if blocked or step > self.total or not may:
            return None
        return Job(EXPLORE, step)

    def _short(self, asked: int) -> bool:
        """fully_async: whether the trainer's next batch is not in the buffer while no explore step runs, so one more
        step starts past the run-ahead bound: explore steps that write fewer experiences than a train step takes
        (explorer.over_rollout leaves tasks behind; operators filter) would otherwise stall the stage there."""
        idle = not self.runs(EXPLORE) and asked == 0
        return self.policy.overlaps_syncs and idle and self.buffered < self.batch_size

    def _train(self) -> Job | None:
        blocked = self.runs(TRAIN) or (self.shared and self.runs(EXPLORE))
        # sharing devices, a train step that waits for more experiences would hold them from every explore step
        waiting = self.shared and self.buffered < self.batch_size
        offer_waits = not self.policy.may_train(self.trained, self.engine_version, self.explored >= self.total)
        if blocked or self.trained >= self.explored or waiting or offer_waits:
            return None
        return Job(TRAIN, self.trained + 1)

    def _close(self) -> list[Job]:
        if self.running or self._closing:
            return []
        self._closing = True
        if self.engine_version < self.trained:
            self._queued.append(Job(SYNC, self.trained))
        self._queued.append(Job(EVALUATE, self.trained))
        return [self._queued.pop(0)]

    def _stalled(self) -> str:
        return (
            f"stalled after explore step {self.explored}: the buffer holds {self.buffered} experiences, fewer than "
            f"buffer.train_batch_size={self.batch_size}, and the next explore step waits for the weights of train "
            f"step {self.trained + 1}; set buffer.train_batch_size to at most buffer.batch_size x "
            "algorithm.repeat_times, or let the explorer run ahead (synchronizer.sync_offset)"
        )
