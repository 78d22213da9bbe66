"""The trainer's process group that setup joins: its collective timeout."""


def test_the_trainers_group_waits_as_long_as_a_sync_may_take_and_never_below_torchs_default():
    """A rank waits in its next gather while rank 0 sends a sync: torch's 30-minute default would cut off a sync
    that synchronizer.sync_timeout allows."""
    from tests.conftest import REFERENCE
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.trainer.worker_setup import group_timeout

    def timeout(seconds: int) -> float:
        config = resolve(Request(REFERENCE, ("hardware=a100", f"synchronizer.sync_timeout={seconds}"))).config
        return group_timeout(config).total_seconds()

    assert (timeout(7200), timeout(60)) == (7200, 1800)
