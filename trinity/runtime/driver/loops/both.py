"""Explore and train in one run (modes both and colocate): the scheduler orders explore and train steps, syncs and
evaluations; explore and train steps run beside each other (taking turns when the mode shares the devices) and
every one is watched until the stage's last step is trained, synced and evaluated."""

import time
from typing import TYPE_CHECKING

from ....launch.plan import inflight_batches
from ....launch.roles import ROLLOUT, TRAINER
from .. import replace, step_results
from ..scheduler import EVALUATE, EXPLORE, SYNC, TRAIN, Job, Scheduler, Stalled
from ..sync_policy import SyncPolicy
from ..watcher import RoleFailed

if TYPE_CHECKING:
    from ..health import EngineHealth
    from ..stage import Stage


def run(stage: "Stage") -> None:
    scheduler = _scheduler(stage)
    health = replace.watch_health(stage)
    try:
        while not scheduler.finished_all:
            try:
                _turn(stage, scheduler)
            except RoleFailed as failed:  # a dead engine or explorer is replaced, its jobs run again; else it ends here
                _recover(stage, scheduler, failed, health)
    finally:
        replace.unwatch_health(stage)


def _turn(stage: "Stage", scheduler: Scheduler) -> None:
    """Start the jobs the scheduler names now; wait for a sync or an evaluation, else for a step to end."""
    try:
        jobs = scheduler.next_jobs()
    except Stalled as exc:
        raise RoleFailed(f"{stage.config.mode} {exc}") from None
    for job in jobs:
        scheduler.started(job)
        if job.kind in (EXPLORE, TRAIN):
            _start_step(stage, job, scheduler.syncs_after(job))
            continue
        # a sync or an evaluation: the stage waits for it before it asks for the next job
        if job.kind == SYNC:
            step_results.sync(stage, job.step)
        else:
            step_results.evaluate(stage, stage.start.offset + job.step)
        scheduler.finished(job)
    if scheduler.running and not any(j.kind in (SYNC, EVALUATE) for j in jobs):
        for key, results in stage.watcher.next_done():
            _step_done(stage, scheduler, scheduler.running[key], results[0])


def _recover(stage: "Stage", scheduler: Scheduler, failed: RoleFailed, health: "EngineHealth | None") -> None:
    """Replace the dead engine(s) or explorer of `failed` (re-raised where replace.py refuses, or the budget is
    spent): every job in flight ends first (a step that ended well counts, one that failed runs again: nothing of it
    reached the buffer), then the new actors are set up and, for an engine, given the trainer's current weights."""
    names = replace.dead_roles(stage, failed)
    if not names:  # the stage may restart from its last checkpoint instead (stage_restart.py)
        replace.say_why_not(stage, failed)
        raise failed
    started = time.monotonic()
    restarts = replace.grant(stage, names, failed, scheduler.started_explore)
    if health is not None:
        health.pause()  # until the new actors are set up and synced: starting, they may be slow to answer
    try:
        again = _settle(stage, scheduler)
    except RoleFailed:  # a train step in flight failed: the run goes on (or ends) with that, nothing replaced
        stage.budget.take_back(restarts)
        raise
    replace.replace_or_raise(stage, names, restarts, failed, min(again, default=scheduler.started_explore + 1) - 1)
    sync = None
    if stage.synchronizer and any(replace.role_of(stage, n) == ROLLOUT for n in names):
        step_results.sync(stage, scheduler.trained)  # the trainer's weights now, to every engine
        scheduler.finished(Job(SYNC, scheduler.trained))
        sync = f"weights v{stage.start.offset + scheduler.trained} synced to the new engine"
        if stage.synchronizer.method.collective:
            sync += " over the weight-sync group formed anew"
    replace.recorded(stage, restarts, time.monotonic() - started, sync)
    if health is not None:
        health.resume()


def _settle(stage: "Stage", scheduler: Scheduler) -> list[int]:
    """Let every job in flight end: a step that ended well is recorded; an explore step or an evaluation that failed
    is to run again (a sync is replaced by the replacement's own); a train step that failed ends the run with its
    cause. Returns the explore steps to run again."""
    again = []
    for job in list(scheduler.running.values()):
        if job.kind in (EXPLORE, TRAIN):
            refs, results = stage.watcher.settle(job.key)
            if results is not None:
                _step_done(stage, scheduler, job, results[0])
                continue
            if job.kind == TRAIN:
                stage.wait(refs)  # raises: its own failure, named
            again.append(job.step)
        scheduler.retry(job)
    return again


def _scheduler(stage: "Stage") -> Scheduler:
    """The explore/train/sync/evaluate order of the stage, from its config."""
    sync, explorer = stage.config.synchronizer, stage.config.explorer
    return Scheduler(
        SyncPolicy(
            sync.sync_style,
            sync.sync_interval,
            sync.sync_offset,
            sync.explorer_sync_interval,
            sync.trainer_sync_interval,
            inflight_batches(stage.config),
        ),
        stage.total,
        stage.start.done,
        shared=stage.mode.shares_devices,
        batch_size=stage.config.buffer.train_batch_size,
        eval_interval=explorer.eval_interval,
        sync_first=stage.engines_behind,  # resumed from a checkpoint without Hugging Face weights
        eval_first=explorer.eval_on_startup,
        waiting=stage.waiting,
    )


def _start_step(stage: "Stage", job: Job, sync_follows: bool) -> None:
    """Start an explore step (on the engines) or a train step (on every rank; `sync_follows`: a sync refills the
    engines before they generate again); the stage does not wait."""
    if job.kind == EXPLORE:
        stage.devices.give(ROLLOUT, job.step)
        stage.watch(job.key, [stage.on_explorer("explore_step").remote(job.step)])
    else:
        stage.devices.give(TRAINER, job.step, sync_follows)
        stage.watch(job.key, [r.train_step.remote(job.step) for r in stage.ranks])


def _step_done(stage: "Stage", scheduler: Scheduler, job: Job, result: dict) -> None:
    """Record a finished explore or train step and tell the scheduler."""
    if job.kind == EXPLORE:
        scheduler.finished(job, result["experiences"])
        step_results.explored(stage, job.step, result)
    else:
        scheduler.finished(job)
        step_results.trained(stage, job.step, result)
