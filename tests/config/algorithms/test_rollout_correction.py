"""How rollout correction's thresholds and options read (trinity/config/algorithms/rollout_correction.py), as verl
0.9.1's rollout_corr_helper parses them: a TIS bound or IcePop's 'lower_upper', rejection options comma-separated,
one threshold for all or one each, k1's ratio bounds against k2's and k3's upper bound."""

import math

import pytest

from trinity.config.algorithms.rollout_correction import (
    REJECTIONS,
    is_bounds,
    rejection_bounds,
    rejection_options,
)


@pytest.mark.parametrize(
    "spec,bounds", [(2.0, (None, 2.0)), (3, (None, 3.0)), ("1.5", (None, 1.5)), (" 0.5_5.0 ", (0.5, 5.0))]
)
def test_an_is_threshold_is_an_upper_bound_or_a_lower_upper_pair(spec, bounds):
    assert is_bounds(spec) == bounds


@pytest.mark.parametrize(
    "spec,says",
    [
        (True, "neither a number"),
        (0, "must be positive"),
        ("-1", "must be positive"),
        ("0_2", "must be positive"),
        ("3_2", "lower bound is above the upper"),
        ("two", "is not a number"),
        ("nan", "is not a number"),
        ("", "is not a number"),
    ],
)
def test_a_bad_is_threshold_says_what_is_wrong(spec, says):
    with pytest.raises(ValueError, match=says):
        is_bounds(spec)


def test_options_are_verls_comma_separated_in_order_without_duplicates():
    assert rejection_options("seq_mean_k3, token_k1,seq_mean_k3,") == ["seq_mean_k3", "token_k1"]
    assert sorted(REJECTIONS) == sorted(
        [f"token_k{k}" for k in (1, 2, 3)]
        + [f"seq_{agg}_k{k}" for agg in ("sum", "mean") for k in (1, 2, 3)]
        + ["seq_max_k2", "seq_max_k3"]
    )
    for spec, says in ((" , ", "names no option"), ("seq_max_k1", "'seq_max_k1' is not a rejection option")):
        with pytest.raises(ValueError, match=says):
            rejection_options(spec)


def test_k1_takes_ratio_bounds_and_one_number_is_its_reciprocal_and_itself():
    assert rejection_bounds(["token_k1"], 2) == {"token_k1": (0.5, 2.0)}
    assert rejection_bounds(["seq_sum_k1"], "0.8_1.5") == {"seq_sum_k1": (0.8, 1.5)}
    assert rejection_bounds(["seq_mean_k3"], "0.01") == {"seq_mean_k3": (None, 0.01)}


def test_one_threshold_serves_every_option_or_each_has_its_own():
    both = ["token_k1", "seq_max_k2"]
    assert rejection_bounds(both, "0.5_2.0,0.1") == {"token_k1": (0.5, 2.0), "seq_max_k2": (None, 0.1)}
    assert rejection_bounds(["seq_mean_k2", "seq_max_k2"], 0.1) == {
        "seq_mean_k2": (None, 0.1),
        "seq_max_k2": (None, 0.1),
    }
    assert math.isclose(rejection_bounds(["token_k1", "seq_sum_k1"], 4.0)["seq_sum_k1"][0], 0.25)


@pytest.mark.parametrize(
    "options,spec,says",
    [
        (["token_k1"], None, "needs a threshold"),
        (["token_k1", "token_k2", "token_k3"], "1.5,0.1", "gives 2 thresholds for 3 options"),
        (["token_k2"], "0.5_2.0", "takes an upper bound alone"),
        (["token_k3"], -0.1, "must be positive"),
        (["token_k1"], "2_1", "lower bound is above the upper"),
        (["token_k1"], 0.5, "lower bound is above the upper"),  # 1/0.5 = 2 > 0.5, as verl finds it
        (["seq_sum_k1"], "0_1", "must be positive"),
        (["token_k1"], [1.0], "neither a number nor a string"),
    ],
)
def test_a_bad_rejection_threshold_says_what_is_wrong(options, spec, says):
    with pytest.raises(ValueError, match=says):
        rejection_bounds(options, spec)
