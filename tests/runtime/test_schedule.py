"""When the explorer may run ahead and when weights move: the sync styles, interval and offset."""

from hypothesis import given
from hypothesis import strategies as st

from trinity.runtime.schedule import SyncPolicy


def drive(policy: SyncPolicy, total: int) -> list[tuple]:
    """A sequential driver like a stage's: sync when due, else explore when allowed, else train; logs each event."""
    explored = trained = version = asked = 0
    log = []
    while trained < total:
        if policy.sync_due(trained, version, explored, asked):
            version, asked = trained, explored
            log.append(("sync", version))
        elif explored < total and explored - trained < 50 and policy.may_explore(explored + 1, version, trained):
            explored += 1
            log.append(("explore", explored, version))
        elif trained < explored:
            trained += 1
            log.append(("train", trained))
        else:
            raise AssertionError(f"deadlock at explored={explored} trained={trained} version={version}")
    if version < trained:  # as a stage does: the final weights reach the engines for the last evaluation
        log.append(("sync", trained))
    return log


def test_interval_1_offset_0_is_strictly_on_policy():
    log = drive(SyncPolicy("fixed", 1, 0), 3)
    assert log == [
        ("explore", 1, 0),
        ("train", 1),
        ("sync", 1),
        ("explore", 2, 1),
        ("train", 2),
        ("sync", 2),
        ("explore", 3, 2),
        ("train", 3),
        ("sync", 3),
    ]


def test_offset_1_lets_the_explorer_run_one_step_ahead():
    policy = SyncPolicy("fixed", 1, 1)
    assert [policy.version_needed(s) for s in range(1, 6)] == [0, 0, 1, 2, 3]
    assert ("explore", 2, 0) in drive(policy, 4)[:2]  # step 2 needs no new weights: it overlaps train step 1


def test_interval_2_syncs_every_second_train_step():
    policy = SyncPolicy("fixed", 2, 0)
    assert [policy.version_needed(s) for s in range(1, 7)] == [0, 0, 2, 2, 4, 4]
    syncs = [e[1] for e in drive(policy, 6) if e[0] == "sync"]
    assert syncs == [2, 4, 6]


def test_trainer_driven_never_blocks_on_a_version():
    policy = SyncPolicy("trainer_driven", 2, 0)
    assert policy.may_explore(3, engine_version=0, trained=0)  # within offset + interval of the trainer
    assert not policy.may_explore(4, engine_version=0, trained=0)  # bounded run-ahead
    assert policy.sync_due(trained=2, engine_version=0, explored=2, last_asked=0)
    assert not policy.sync_due(trained=3, engine_version=2, explored=3, last_asked=0)


def test_explorer_driven_asks_every_interval_explore_steps():
    policy = SyncPolicy("explorer_driven", 3, 0)
    # asks after its 3rd step, takes what there is
    assert policy.sync_due(trained=1, engine_version=0, explored=3, last_asked=0)
    assert not policy.sync_due(trained=2, engine_version=1, explored=4, last_asked=3)
    assert not policy.sync_due(trained=1, engine_version=0, explored=3, last_asked=3)  # asked already at this step


@given(
    style=st.sampled_from(["fixed", "trainer_driven", "explorer_driven"]),
    interval=st.integers(1, 4),
    offset=st.integers(0, 3),
    total=st.integers(1, 12),
)
def test_every_style_finishes_and_never_trains_ahead_of_its_data(style, interval, offset, total):
    log = drive(SyncPolicy(style, interval, offset), total)
    explored = trained = 0
    for event in log:
        if event[0] == "explore":
            explored = event[1]
        elif event[0] == "train":
            trained = event[1]
            assert trained <= explored  # train step t learns from explore step t
    assert trained == total
    if style == "fixed":  # each explore step waited for the weights its offset and interval allow
        policy = SyncPolicy(style, interval, offset)
        assert all(e[2] >= policy.version_needed(e[1]) for e in log if e[0] == "explore")
