"""The data selectors (trinity/runtime/data/selectors.py): which rows each read takes, as Trinity-RFT 0.6.0's do; every
pick a function of the position, so a resumed reading goes on where it stopped."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trinity.config.schema.buffer import DataSelectorConfig
from trinity.config.selectors import SELECTORS
from trinity.runtime.data import selectors

# seven rows with two features; UPSTREAM is what Trinity-RFT 0.6.0's own selectors (buffer/selector/selector.py, run
# on these rows with upstream's defaults, seed 42) read in three batches of four, and what its Beta estimate
# (InterpolationBetaPREstimator) gives after one update with pass rates 1, 0, 0.5 on rows 0, 1, 2
ROWS = [{"easy": i % 3, "strong": (i % 3) / 2 + 0.3} for i in range(7)]
UPSTREAM = {
    "sequential": [[0, 1, 2, 3], [4, 5, 6, 0], [1, 2, 3, 4]],
    "shuffle": [[3, 2, 6, 4], [1, 5, 0, 2], [6, 5, 1, 4]],
    "random": [[6, 0, 5, 3], [4, 0, 2, 1], [5, 3, 4, 6]],
    "offline_easy2hard": [[5, 2, 4, 1], [6, 3, 0, 5], [2, 4, 1, 6]],
}
UPSTREAM_ESTIMATE = [0.9444444444, 0.0555555556, 0.5, 0.6538484616, 0.4999984615, 0.3461484615, 0.6538484616]
UPSTREAM_AFTER = [0, 3, 6]  # difficulty_based with tau 0 after that update: the 3 rows nearest a pass rate of 1
FEATURES = {"offline_easy2hard": ["easy"], "difficulty_based": ["easy", "strong"]}


def build(name, rows=ROWS, **settings):
    return selectors.build(
        rows, DataSelectorConfig(selector_type=name, feature_keys=FEATURES.get(name, []), **settings)
    )


def test_the_schema_names_every_selector_there_is():
    from typing import get_args

    from trinity.config.schema.buffer import SelectorType

    assert list(get_args(SelectorType)) == list(SELECTORS)


@pytest.mark.parametrize("name", sorted(UPSTREAM))
def test_each_selector_reads_what_trinity_rfts_reads(name):
    picks = build(name)
    assert [picks.pick(p, 4) for p in (0, 4, 8)] == UPSTREAM[name]


def test_difficulty_based_learns_the_pass_rates_fed_back_as_trinity_rfts_estimate_does():
    picks = build("difficulty_based", kwargs={"tau": 0})
    assert picks.pick(0, 3) == [0, 1, 2]  # every estimate 1/2 at first: ties go to the first rows
    picks.feedback([0, 1, 2], [1.0, 0.0, 0.5])
    assert picks.estimate.mean().tolist() == pytest.approx(UPSTREAM_ESTIMATE)
    assert picks.pick(3, 3) == UPSTREAM_AFTER


def test_difficulty_based_draws_near_its_target_and_by_its_seed():
    rows = [{"easy": 0.0, "strong": 0.0}] * 50 + [{"easy": 1.0, "strong": 1.0}] * 50
    picks = build("difficulty_based", rows, kwargs={"tau": 0.05, "rho": 1.0, "lamb": 1.0})
    picks.feedback([0, 50], [0.0, 1.0])  # the features now predict each row's rate: 0 for the first half, 1 after
    drawn = picks.pick(0, 20)
    assert len(set(drawn)) == 20 and all(i >= 50 for i in drawn)  # target_reward 1: the easy half
    again = build("difficulty_based", rows, kwargs={"tau": 0.05, "rho": 1.0, "lamb": 1.0})
    again.feedback([0, 50], [0.0, 1.0])
    assert again.pick(0, 20) == drawn and again.pick(20, 20) != drawn  # the seed and the position decide
    other = build("difficulty_based", rows, seed=7, kwargs={"tau": 0.05, "rho": 1.0, "lamb": 1.0})
    other.feedback([0, 50], [0.0, 1.0])
    assert other.pick(0, 20) != drawn
    hard = build("difficulty_based", rows, kwargs={"tau": 0.05, "rho": 1.0, "lamb": 1.0, "target_reward": 0.0})
    hard.feedback([0, 50], [0.0, 1.0])
    assert all(i < 50 for i in hard.pick(0, 20))


def test_adaptive_rho_halves_rho_when_the_features_predict_badly():
    picks = build("difficulty_based", kwargs={"adaptive_rho": True})
    picks.feedback([0, 3], [0.3, 0.3])  # rows 0 and 3 share their features: the capability fits them exactly
    assert picks.estimate.rho == 0.2
    picks.feedback([0, 3], [0.0, 1.0])  # the same features, rates 0 and 1: the prediction is off by 0.5 on average
    assert picks.estimate.rho == 0.1
    fixed = build("difficulty_based")
    fixed.feedback([0, 3], [0.3, 0.3])
    fixed.feedback([0, 3], [0.0, 1.0])
    assert fixed.estimate.rho == 0.2


def test_do_sample_scores_a_draw_from_each_estimate():
    mean = build("difficulty_based", kwargs={"tau": 0})
    drawn = build("difficulty_based", kwargs={"tau": 0, "do_sample": True})
    assert drawn.pick(0, 7) != mean.pick(0, 7) and sorted(drawn.pick(0, 7)) == list(range(7))


positions = st.integers(0, 200)
counts = st.integers(0, 20)


@given(st.sampled_from(["sequential", "shuffle", "offline_easy2hard"]), positions, counts, counts)
def test_a_reading_split_anywhere_reads_the_same_rows(name, position, first, second):
    """What a resumed reading takes at a position is what an unbroken one takes there."""
    picks = build(name)
    assert picks.pick(position, first + second) == picks.pick(position, first) + picks.pick(position + first, second)


@given(st.sampled_from(["sequential", "shuffle", "offline_easy2hard"]), st.integers(0, 5), st.integers(1, 30))
def test_each_epoch_reads_every_row_once(name, epoch, size):
    picks = build(name, [{"easy": i % 4, "strong": 0.5} for i in range(size)])
    assert sorted(picks.pick(epoch * size, size)) == list(range(size))


def test_shuffle_is_a_new_permutation_each_epoch_seeded_by_seed_plus_epoch():
    picks = build("shuffle", seed=3)
    assert picks.pick(7, 7) == np.random.default_rng(4).permutation(7).tolist()
    assert picks.pick(0, 7) != picks.pick(7, 7)


@given(positions, st.integers(1, 7))
def test_random_draws_distinct_rows_per_batch_by_seed_and_position(position, count):
    picks = build("random")
    drawn = picks.pick(position, count)
    assert len(set(drawn)) == count and drawn == build("random").pick(position, count)


def test_offline_easy2hard_reads_the_highest_features_first():
    rows = [{"a": 1, "b": 0}, {"a": 3, "b": 0}, {"a": 1, "b": 5}, {"a": 2, "b": 9}]
    picks = selectors.build(rows, DataSelectorConfig(selector_type="offline_easy2hard", feature_keys=["a", "b"]))
    assert picks.pick(0, 4) == [1, 3, 2, 0]  # by a, then b


@pytest.mark.parametrize(
    "rows,error",
    [
        ([{"easy": 1}], "row 0 has no column 'strong' (data_selector.feature_keys)"),
        ([{"easy": 1, "strong": "high"}], "row 0: column 'strong' holds 'high', not a number"),
    ],
)
def test_a_feature_column_that_is_missing_or_not_a_number_is_named(rows, error):
    with pytest.raises(ValueError) as err:
        build("difficulty_based", rows)
    assert str(err.value) == error


@pytest.mark.parametrize("name", ["random", "difficulty_based"])
def test_a_draw_of_distinct_rows_larger_than_the_data_set_is_refused(name):
    with pytest.raises(ValueError, match=f"{name} draws 8 distinct rows a batch from 7"):
        build(name).pick(0, 8)
