"""The run's restart budget: at most max_restarts within any restart_window_s, every grant recorded."""

from hypothesis import given
from hypothesis import strategies as st

from trinity.runtime.driver.restarts import RestartBudget


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_budget_grants_max_restarts_within_the_window_then_refuses_until_the_oldest_leaves_it():
    clock = Clock()
    budget = RestartBudget(2, 60.0, clock)
    assert budget.grant("rollout.engine0", "died: SIGKILL", 3).at_s == 0.0
    clock.now += 10
    assert budget.grant("explorer", "died: SIGKILL", 5) is not None
    clock.now += 10
    assert budget.grant("trainer_node0.rank0", "died: SIGKILL", 7) is None  # 2 within the last 60 s
    assert budget.spent() == "2 restarts within fault_tolerance.restart_window_s=60 s already"
    clock.now += 40.5  # the first is now 60.5 s old
    restart = budget.grant("trainer_node0.rank0", "died: SIGKILL", 9)
    assert restart is not None and (restart.role, restart.step, restart.at_s) == ("trainer_node0.rank0", 9, 60.5)
    assert [r.role for r in budget.restarts] == ["rollout.engine0", "explorer", "trainer_node0.rank0"]


def test_no_restarts_means_the_first_failure_ends_the_run():
    assert RestartBudget(0, 3600.0, Clock()).grant("explorer", "died", 1) is None


@given(
    most=st.integers(0, 4),
    window=st.floats(1.0, 100.0),
    gaps=st.lists(st.floats(0.0, 50.0), min_size=1, max_size=30),
)
def test_no_window_ever_holds_more_than_max_restarts(most, window, gaps):
    clock = Clock()
    budget = RestartBudget(most, window, clock)
    for gap in gaps:
        clock.now += gap
        budget.grant("rollout.engine0", "died", 1)
    times = [r.at_s for r in budget.restarts]
    assert all(sum(1 for u in times if t - window < u <= t) <= most for t in times)


def test_recent_counts_the_restarts_within_the_window_and_the_run_config_makes_the_budget():
    from types import SimpleNamespace

    from trinity.config.schema.fault_tolerance import FaultToleranceConfig
    from trinity.runtime.driver.restarts import restart_budget

    clock = Clock()
    budget = RestartBudget(3, 60.0, clock)
    budget.grant("explorer", "died", 1)
    clock.now += 61
    budget.grant("rollout.engine0", "died", 2)
    assert budget.recent() == 1
    section = FaultToleranceConfig(max_restarts=5, restart_window_s=10.0)
    made = restart_budget(SimpleNamespace(fault_tolerance=section))  # a RunConfig's section
    assert (made.most, made.window_s, made.restarts) == (5, 10.0, [])


def test_restarts_taken_back_no_longer_count():
    """A replacement that did not happen gives its restarts back (loops/both.py): the stage's restart asks anew."""
    budget = RestartBudget(2, 3600.0)
    first, second = budget.grant("rollout.engine0", "died", 3), budget.grant("rollout.engine1", "died", 3)
    budget.take_back([second])
    assert budget.restarts == [first] and budget.recent() == 1
    assert budget.grant("buffer", "died", 4) is not None
