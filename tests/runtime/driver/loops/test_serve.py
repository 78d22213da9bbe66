"""A serve step's explorer line carries every count an explore step's does (its own explorer ran none of them)."""

from trinity.runtime.driver.loops.serve import NO_EXPLORE_STEP
from trinity.runtime.explorer.results import batch_metrics
from trinity.runtime.roles.protocols import ExploreResult


def test_a_served_step_gives_every_key_of_an_explore_result():
    assert set(batch_metrics([], 1.0) | NO_EXPLORE_STEP) == set(ExploreResult.__annotations__)
    assert set(NO_EXPLORE_STEP.values()) == {0}
