"""When the explorer may run ahead and when weights move (the sync policy), and the order the scheduler gives."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trinity.runtime.driver.scheduler import EVALUATE, EXPLORE, SYNC, TRAIN, Job, Scheduler, Stalled
from trinity.runtime.driver.sync_policy import SyncPolicy


def drive(scheduler: Scheduler, pick=lambda running: 0, experiences: int = 1) -> list[tuple]:
    """Run the real Scheduler: start what it asks, finish the running job `pick` chooses; log every event.

    Events: ("start", kind, step, kinds running), ("explore", step, engine version at its start),
    ("train", step), ("sync", version), ("evaluate", version)."""
    log, running = [], []
    while not scheduler.finished_all:
        for job in scheduler.next_jobs():
            scheduler.started(job)
            if job.kind in (SYNC, EVALUATE):
                busy = {j.kind for j, _ in running}
                if scheduler.policy.overlaps_syncs:  # fully_async: the engines take weights while explore steps run
                    assert "train" not in busy if job.kind == SYNC else not scheduler.shared, (job, busy)
                else:  # a sync needs both sides between steps; an evaluation the engines (and, shared, the devices)
                    assert not busy if job.kind == SYNC or scheduler.shared else EXPLORE not in busy, (job, busy)
                log.append((job.kind, job.step))
                scheduler.finished(job)
                continue
            running.append((job, scheduler.engine_version))
            log.append(("start", job.kind, job.step, sorted(j.kind for j, _ in running)))
        if running:
            job, version = running.pop(pick(running))
            scheduler.finished(job, experiences)
            log.append((job.kind, job.step, version) if job.kind == EXPLORE else (job.kind, job.step))
    return log


def events(log: list[tuple]) -> list[tuple]:
    return [e for e in log if e[0] != "start"]


def test_interval_1_offset_0_is_strictly_on_policy():
    log = drive(Scheduler(SyncPolicy("fixed", 1, 0), 3))
    assert events(log) == [
        ("explore", 1, 0),
        ("train", 1),
        ("sync", 1),
        ("explore", 2, 1),
        ("train", 2),
        ("sync", 2),
        ("explore", 3, 2),
        ("train", 3),
        ("sync", 3),
        ("evaluate", 3),
    ]


def test_offset_1_lets_the_explorer_run_one_step_ahead():
    policy = SyncPolicy("fixed", 1, 1)
    assert [policy.version_needed(s) for s in range(1, 6)] == [0, 0, 1, 2, 3]
    log = drive(Scheduler(policy, 4))
    assert events(log)[:2] == [("explore", 1, 0), ("explore", 2, 0)]  # step 2 needs no new weights
    assert ("start", "train", 1, ["explore", "train"]) in log  # it overlaps train step 1


def test_sharing_devices_never_overlaps_explore_and_train():
    log = drive(Scheduler(SyncPolicy("fixed", 1, 1), 4, shared=True))
    assert all(len(e[3]) == 1 for e in log if e[0] == "start")
    assert [e[1] for e in events(log) if e[0] == "train"] == [1, 2, 3, 4]


def test_interval_2_syncs_every_second_train_step():
    policy = SyncPolicy("fixed", 2, 0)
    assert [policy.version_needed(s) for s in range(1, 7)] == [0, 0, 2, 2, 4, 4]
    syncs = [e[1] for e in drive(Scheduler(policy, 6)) if e[0] == "sync"]
    assert syncs == [2, 4, 6]


def test_evaluations_follow_the_interval_and_the_start():
    scheduler = Scheduler(SyncPolicy("fixed", 1, 0), 5, eval_interval=2, eval_first=True, sync_first=True)
    log = events(drive(scheduler))
    assert log[:2] == [("sync", 0), ("evaluate", 0)]  # a resumed stage's engines first get the trainer's weights
    # after explore steps 2 and 4, at the weights they explored with; the last after the final sync
    assert [e for e in log if e[0] == "evaluate"] == [
        ("evaluate", 0),
        ("evaluate", 1),
        ("evaluate", 3),
        ("evaluate", 5),
    ]
    assert log[-2:] == [("sync", 5), ("evaluate", 5)]
    # the last explore step is evaluated once, after the final sync
    evaluated = [
        e for e in events(drive(Scheduler(SyncPolicy("fixed", 1, 0), 4, eval_interval=2))) if e[0] == "evaluate"
    ]
    assert evaluated == [("evaluate", 1), ("evaluate", 4)]


def test_a_resumed_stage_counts_from_its_checkpoint():
    log = events(drive(Scheduler(SyncPolicy("fixed", 1, 0), 4, done=2)))
    assert log[0] == ("explore", 3, 2) and log[-1] == ("evaluate", 4)
    assert [e[1] for e in log if e[0] == "train"] == [3, 4]


def test_sharing_devices_stops_when_one_turn_cannot_fill_a_batch():
    scheduler = Scheduler(SyncPolicy("fixed", 1, 0), 3, shared=True, batch_size=4)
    with pytest.raises(Stalled, match=r"holds 2 experiences, fewer than buffer.train_batch_size=4"):
        drive(scheduler, experiences=2)
    assert scheduler.explored == 1 and scheduler.trained == 0


def test_sharing_devices_counts_what_a_resume_kept_in_the_buffer():
    """A resumed stage's buffer kept explore step 3 whole (train step 2 took part of it), so its second run stores
    nothing; the experiences it kept fill train step 3's batch."""
    scheduler = Scheduler(SyncPolicy("fixed", 1, 0), 4, done=2, shared=True, batch_size=4, waiting=4)
    assert scheduler.next_jobs() == [Job(EXPLORE, 3)]
    scheduler.started(Job(EXPLORE, 3))
    scheduler.finished(Job(EXPLORE, 3), experiences=0)
    assert scheduler.next_jobs() == [Job(TRAIN, 3)]
    with pytest.raises(Stalled, match="holds 0 experiences"):  # without them
        drive(Scheduler(SyncPolicy("fixed", 1, 0), 4, done=2, shared=True, batch_size=4), experiences=0)


def test_trainer_driven_never_blocks_on_a_version():
    policy = SyncPolicy("trainer_driven", 2, 0)
    # runs ahead to the first check point at least offset + interval + 1 past the trainer
    assert policy.may_explore(4, engine_version=0, trained=0)
    assert not policy.may_explore(5, engine_version=0, trained=0)  # bounded run-ahead
    assert not policy.may_explore(5, engine_version=0, trained=1) and policy.may_explore(6, engine_version=0, trained=2)
    assert policy.sync_due(trained=2, engine_version=0, explored=2, last_asked=0)
    assert not policy.sync_due(trained=3, engine_version=2, explored=3, last_asked=0)
    assert not policy.sync_due(trained=2, engine_version=0, explored=3, last_asked=0)  # not a check point


def test_explorer_driven_asks_every_interval_explore_steps():
    policy = SyncPolicy("explorer_driven", 3, 0)
    # asks after its 3rd step, takes what there is
    assert policy.sync_due(trained=1, engine_version=0, explored=3, last_asked=0)
    assert not policy.sync_due(trained=2, engine_version=1, explored=4, last_asked=3)
    assert not policy.sync_due(trained=1, engine_version=0, explored=3, last_asked=3)  # asked already at this step
    # Trinity-RFT's explorer counts its check points from sync_offset
    offset = SyncPolicy("explorer_driven", 3, 1)
    assert [n for n in range(1, 11) if offset.check_point(n)] == [4, 7, 10]


def test_separate_intervals_default_to_sync_interval_and_fixed_takes_one():
    policy = SyncPolicy("trainer_driven", 2, 0)
    assert (policy.explorer_interval, policy.trainer_interval) == (2, 2)
    assert SyncPolicy("fixed", 1, 0, 3, 3).version_needed(7) == 6
    with pytest.raises(ValueError, match="'fixed' needs one interval, not explorer 2 and trainer 1"):
        SyncPolicy("fixed", 1, 0, explorer_interval=2, trainer_interval=1)


def test_trainer_offers_every_trainer_interval_and_the_explorer_takes_at_its_check_points():
    """trainer_sync_interval 2, explorer_sync_interval 3: the offers of train steps 2, 4, 6 are taken after explore
    steps 3, 6 and 9 (the trainer waits with each); the explorer never waits for a version."""
    train_first = lambda running: next((i for i, (job, _) in enumerate(running) if job.kind == "train"), 0)  # noqa: E731
    log = drive(Scheduler(SyncPolicy("trainer_driven", 1, 0, explorer_interval=3, trainer_interval=2), 9), train_first)
    explored, syncs = 0, []
    for event in events(log):
        if event[0] == "explore":
            explored = event[1]
        elif event[0] == "sync":
            syncs.append((explored, event[1]))
    assert syncs == [(3, 2), (6, 4), (9, 6), (9, 9)]  # the last: the stage's final sync
    # the trainer, waiting with the offer of step 2, starts step 3 only after the sync at explore step 3
    train_3 = next(i for i, e in enumerate(log) if e[:3] == ("start", "train", 3))
    assert log.index(("sync", 2)) < train_3


@given(
    style=st.sampled_from(["fixed", "trainer_driven", "explorer_driven"]),
    explorer_interval=st.integers(1, 4),
    trainer_interval=st.integers(1, 4),
    offset=st.integers(0, 3),
    total=st.integers(1, 12),
    shared=st.booleans(),
    data=st.data(),
)
def test_every_style_finishes_and_never_trains_ahead_of_its_data(
    style, explorer_interval, trainer_interval, offset, total, shared, data
):
    """Separate explorer and trainer intervals (one under `fixed`): the order holds, the trainer offers every trainer
    interval and waits, the explorer takes only at its check points, and staleness stays within the style's bound."""
    if style == "fixed":
        trainer_interval = explorer_interval
    policy = SyncPolicy(style, 1, offset, explorer_interval, trainer_interval)
    pick = lambda running: data.draw(st.integers(0, len(running) - 1))  # noqa: E731 - calls finish in any order
    log = drive(Scheduler(policy, total, shared=shared), pick)
    explored = trained = version = 0
    asked = []  # explore steps done at each sync before the stage's last
    for event in log:
        if event[0] == "start" and event[1] == "train":
            assert event[2] <= explored  # train step t learns from explore step t's experiences
            # an offer not yet taken holds the trainer, unless no explore step is left to take it
            assert explored >= total or not policy.offers(event[2] - 1, version), (event, version)
        if event[0] == "start" and event[1] == "explore":
            step = event[2]
            if style == "fixed":  # each explore step waited for the weights its offset and interval allow
                assert version >= policy.version_needed(step)
            else:  # bounded run-ahead, and so bounded staleness
                assert step <= policy.explore_limit(trained) <= trained + offset + 2 * explorer_interval
                bound = offset + (
                    2 * explorer_interval + trainer_interval if style == "trainer_driven" else 3 * explorer_interval - 1
                )
                assert step - 1 - version <= bound, (step, version, bound)
        if event[0] == "start" and shared:
            assert len(event[3]) == 1  # one holder of the devices at a time
        if event[0] == "explore":
            explored = event[1]
        if event[0] == "train":
            trained = event[1]
        if event[0] == "sync":
            assert event[1] > version
            version = event[1]
            asked.append((explored, version))
    assert explored == total and [e[1] for e in events(log) if e[0] == "train"] == list(range(1, total + 1))
    assert events(log)[-1] == ("evaluate", total) and version == total
    before_last = asked[:-1]
    if style != "explorer_driven":  # the trainer offers every trainer interval
        assert all(v % trainer_interval == 0 for _, v in before_last)
    if style != "fixed":  # the explorer takes only at its check points
        assert all(policy.check_point(n) for n, _ in before_last), asked
    if style == "explorer_driven":  # and asks once at each
        assert len({n for n, _ in before_last}) == len(before_last)


@given(
    st.sampled_from(["fixed", "trainer_driven", "explorer_driven"]),
    st.integers(1, 3),
    st.integers(0, 2),
    st.integers(1, 6),
    st.integers(0, 3),
    st.integers(1, 3),
)
def test_a_train_step_on_shared_devices_knows_as_it_starts_whether_a_sync_comes_before_the_engines_generate(
    style, interval, offset, total, eval_interval, trainer_interval
):
    """Engines sleeping through a train step may discard their weights only where a sync refills them before any
    explore step or evaluation: the prediction `syncs_after` makes as the step starts is what then happens."""
    trainer_interval = interval if style == "fixed" else trainer_interval  # separate intervals in the driven styles
    policy = SyncPolicy(style, interval, offset, trainer_interval=trainer_interval)
    scheduler = Scheduler(policy, total, shared=True, eval_interval=eval_interval)
    predicted, after_train, trains = {}, {}, []  # trains: the train steps since the last other job
    while not scheduler.finished_all:
        for job in scheduler.next_jobs():
            scheduler.started(job)
            if job.kind == "train":
                predicted[job.step] = scheduler.syncs_after(job)
                trains.append(job.step)
            else:
                after_train.update((step, job.kind) for step in trains)  # what came after them
                trains = []
            scheduler.finished(job, 1)
    assert predicted == {step: after_train.get(step) == SYNC for step in predicted}
    assert predicted[total] and not scheduler.syncs_after(Scheduler(SyncPolicy(style, 1, 0), 1).next_jobs()[0])


def test_fully_async_keeps_max_inflight_batches_explore_steps_running_and_syncs_beside_them():
    policy = SyncPolicy("fully_async", 1, 0, inflight=2)
    log = drive(Scheduler(policy, 4))
    assert log[:2] == [("start", "explore", 1, ["explore"]), ("start", "explore", 2, ["explore", "explore"])]
    # explore step 1 ends: train step 1 runs beside explore step 2, and its weights reach the engines beside it too
    assert log[2:6] == [
        ("explore", 1, 0),
        ("start", "train", 1, ["explore", "train"]),
        ("explore", 2, 0),
        ("train", 1),
    ]
    assert log[6:8] == [("sync", 1), ("start", "explore", 3, ["explore"])]
    assert events(log)[-2:] == [("sync", 4), ("evaluate", 4)]


def test_fully_async_with_one_batch_in_flight_and_no_offset_is_on_policy():
    log = events(drive(Scheduler(SyncPolicy("fully_async", 1, 0, inflight=1), 3)))
    assert [e for e in log if e[0] == "explore"] == [("explore", 1, 0), ("explore", 2, 1), ("explore", 3, 2)]


@given(
    inflight=st.integers(1, 4),
    trainer_interval=st.integers(1, 3),
    offset=st.integers(0, 2),
    total=st.integers(1, 10),
    eval_interval=st.integers(0, 3),
    data=st.data(),
)
def test_fully_async_finishes_in_any_order_within_its_inflight_and_staleness_bounds(
    inflight, trainer_interval, offset, total, eval_interval, data
):
    """Explore steps end in any order: at most `inflight` run at once, each starts with weights at most offset +
    inflight + trainer interval - 2 steps older than the step before it, and every offer is taken as it is made."""
    policy = SyncPolicy("fully_async", 1, offset, trainer_interval=trainer_interval, inflight=inflight)
    pick = lambda running: data.draw(st.integers(0, len(running) - 1))  # noqa: E731 - calls finish in any order
    log = drive(Scheduler(policy, total, eval_interval=eval_interval), pick)
    trained = version = 0
    for event in log:
        if event[0] == "start":
            assert event[3].count("explore") <= inflight and event[3].count("train") <= 1
        if event[0] == "start" and event[1] == "explore":
            assert event[2] <= trained + offset + inflight
            assert event[2] - 1 - version <= offset + inflight + trainer_interval - 2, (event, version)
        if event[0] == "train":
            trained = event[1]
        if event[0] == "sync":
            assert event[1] == trained and (event[1] % trainer_interval == 0 or event[1] == total)
            version = event[1]
    assert sorted(e[1] for e in log if e[0] == "explore") == list(range(1, total + 1))
    assert events(log)[-1] == ("evaluate", total) and version == total


@given(
    style=st.sampled_from(["fixed", "trainer_driven", "explorer_driven", "fully_async"]),
    offset=st.integers(0, 2),
    total=st.integers(1, 8),
    failures=st.lists(st.integers(0, 30), max_size=6),
)
def test_a_retried_explore_step_runs_again_before_the_next_and_every_step_is_explored_once(
    style, offset, total, failures
):
    """A replaced engine's failed explore steps (scheduler.retry, loops/both.py) run again, first: every step still
    ends explored exactly once, in any order of failures, and the stage finishes."""
    scheduler = Scheduler(SyncPolicy(style, 1, offset, inflight=2), total)
    explored, running, turn, fails = [], [], 0, list(failures)
    while not scheduler.finished_all:
        for job in scheduler.next_jobs():
            scheduler.started(job)
            if job.kind in (SYNC, EVALUATE):
                scheduler.finished(job)
            else:
                running.append(job)
        if running:
            turn += 1
            job = running.pop(0)
            if job.kind == EXPLORE and fails and fails[0] <= turn:
                fails.pop(0)
                scheduler.retry(job)  # its engine died: nothing of it was written
                continue
            scheduler.finished(job, 1)
            explored += [job.step] if job.kind == EXPLORE else []
    assert sorted(explored) == list(range(1, total + 1))


def test_a_retried_evaluation_runs_next_and_a_train_step_is_never_retried():
    scheduler = Scheduler(SyncPolicy("fixed", 1, 0), 2, eval_first=True)
    (evaluation,) = scheduler.next_jobs()
    scheduler.started(evaluation)
    scheduler.retry(evaluation)
    assert scheduler.next_jobs() == [evaluation] and not scheduler.running
    with pytest.raises(ValueError, match="not retried"):
        scheduler.retry(Job(TRAIN, 1))


def test_fully_async_explores_past_its_bound_only_while_the_trainers_next_batch_is_short():
    """Explore steps that write fewer experiences than a train step takes (3 of 4: an operator filters): a train step
    ends only once its batch is in the buffer. Within the run-ahead bound the trainer would wait at train step 4 for
    a batch only explore step 6 makes, which waits for the trainer; one step past the bound starts instead, and only
    while no explore step runs and the buffer is short."""
    scheduler = Scheduler(SyncPolicy("fully_async", 1, 0, inflight=2), 8, batch_size=4)
    running, past = [], []
    while True:
        while jobs := scheduler.next_jobs():  # start all it asks for (a sync or an evaluation ends at once)
            for job in jobs:
                scheduler.started(job)
                if job.kind in (SYNC, EVALUATE):
                    scheduler.finished(job)
                    continue
                if job.kind == EXPLORE and job.step > scheduler.trained + 2:  # past offset + inflight
                    past.append((job.step, scheduler.buffered, scheduler.runs(EXPLORE)))
                running.append(job)
        ready = [j for j in running if j.kind == EXPLORE or scheduler.buffered >= 4]  # a train step waits for its batch
        if not ready:
            break
        running.remove(ready[0])
        scheduler.finished(ready[0], 3 if ready[0].kind == EXPLORE else 0)
    assert scheduler.explored == 8 and scheduler.trained == 6  # 24 experiences: six batches of 4, none stalled
    assert past and all(buffered < 4 and explores == 1 for _, buffered, explores in past), past
