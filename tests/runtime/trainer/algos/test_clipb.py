"""Clip_B against values worked by hand from its definition (Trinity-RFT 0.6.0's advantage_fn/clipb_advantage.py,
arXiv 2602.03392): GRPO's advantages through the entry, as the trainer reaches them; then the entropy mask over the
whole batch: S = p (H + log p) per valid token, centred by its mean, a negative-advantage token dropped where that falls
below -mu x the population std, positive and zero ones never, nothing where the signal is flat; and the metrics it
reports."""

import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trinity.config.algorithms.advantages import ADVANTAGES
from trinity.config.algorithms.functions import FUNCTIONS
from trinity.runtime.experience import Experience
from trinity.runtime.trainer import functions
from trinity.runtime.trainer.algos.clipb import clipb_mask

pytest.importorskip("verl.trainer.ppo.core_algos")


def clipb(mu=2.5, **args):
    full = FUNCTIONS["advantage_fn"]["clipb"](mu=mu, **args).model_dump()  # what a config fills in
    return SimpleNamespace(advantage_fn="clipb", advantage_fn_args=full)


# --- the advantages: GRPO's ------------------------------------------------------------------------------------


def test_clipbs_advantages_are_grpos_normalised_within_each_task_on_every_token():
    rewards = {"a": [1.0, 0.0, 0.0, 1.0], "b": [1.0, 1.0]}
    exps = [Experience([1], [2, 3], [-1.0, -1.0], r, g) for g, rs in rewards.items() for r in rs]
    exps.append(Experience([1], [2], [-1.0], 0.5, "alone"))
    got, returns = functions.advantages_and_returns(exps, clipb())
    spread = 0.5 / (math.sqrt(1 / 3) + 1e-6)  # (r - mean) / (unbiased std + epsilon) of [1, 0, 0, 1]
    assert [row[0] for row in got[:4]] == pytest.approx([spread, -spread, -spread, spread], rel=1e-6)
    assert got[4:6] == [[0.0, 0.0], [0.0, 0.0]]  # all equal: nothing to learn
    assert got[6] == pytest.approx([0.5 / (1 + 1e-6)])  # a task of one: mean 0, std 1, as upstream
    assert all(len(set(row)) == 1 for row in got) and returns == got
    assert functions.advantages_and_returns(exps, clipb(epsilon=1.0))[0][0][0] == pytest.approx(
        0.5 / (math.sqrt(1 / 3) + 1.0)
    )


def test_the_entry_reads_the_entropy_and_names_its_mask():
    entry = ADVANTAGES["clipb"]
    assert (entry.estimator, entry.kwargs, entry.grouped) == ("trinity_grpo", {"epsilon": "epsilon"}, True)
    assert entry.entropy and functions.token_mask("clipb") is clipb_mask
    assert functions.token_mask("grpo") is None and not ADVANTAGES["grpo"].entropy


# --- the mask ---------------------------------------------------------------------------------------------------


def test_a_negative_token_whose_signal_falls_mu_population_stds_below_the_mean_leaves_the_loss():
    # log p = 0 (p = 1): S = H = [1, 1 | 1, 5]; mean 2, population variance (1 + 1 + 1 + 9) / 4 = 3, std sqrt(3)
    advantages, log_probs, entropy = [[1.0, 1.0], [-1.0, -1.0]], [[0.0, 0.0]] * 2, [[1.0, 1.0], [1.0, 5.0]]
    masks = [[1, 1], [1, 1]]
    keep, metrics = clipb_mask(advantages, log_probs, entropy, masks, mu=0.5)
    # S - mean = -1 < -0.5 sqrt(3) = -0.87 on three tokens: only the negative one goes, the positive ones stay
    assert keep == [[1, 1], [0, 1]]
    assert metrics == pytest.approx(
        {"frac_clipped": 0.25, "frac_clipped_pos": 0.0, "frac_clipped_neg": 0.5, "ES": 2.0, "varS": 3.0}
    )
    # mu 0.6: the bound is -1.04, below -1: nothing goes (mu scales the std, not a bare signal)
    assert clipb_mask(advantages, log_probs, entropy, masks, mu=0.6)[0] == [[1, 1], [1, 1]]


def test_a_token_exactly_on_the_bound_is_kept():
    # S = [0, 2]: mean 1, std 1, S - mean = [-1, 1]
    args = ([[-1.0, -1.0]], [[0.0, 0.0]], [[0.0, 2.0]], [[1, 1]])
    assert clipb_mask(*args, mu=1.0)[0] == [[1, 1]]
    assert clipb_mask(*args, mu=0.99)[0] == [[0, 1]]


def test_the_signal_is_p_times_entropy_plus_log_p_from_the_rollouts_log_probs():
    # S = [1, 0.25 (1 + ln 4 - ln 4), 1, 1]: the token of highest entropy has the lowest signal
    quarter = math.log(0.25)
    keep, metrics = clipb_mask(
        [[-1.0, -1.0, -1.0, -1.0]], [[0.0, quarter, 0.0, 0.0]], [[1.0, 1.0 - quarter, 1.0, 1.0]], [[1, 1, 1, 1]], mu=1.5
    )
    # mean 0.8125; population variance (3 x 0.1875^2 + 0.5625^2) / 4 = 0.10546875; -0.5625 is -1.73 std
    assert keep == [[1, 0, 1, 1]]
    assert metrics["ES"] == pytest.approx(0.8125) and metrics["varS"] == pytest.approx(0.10546875)
    assert metrics["frac_clipped"] == metrics["frac_clipped_neg"] == pytest.approx(0.25)


def test_a_flat_signal_masks_nothing():
    # S = [0, 1e-13]: std 5e-14, under upstream's 1e-12; mu 0 would drop the token below the mean otherwise
    keep, metrics = clipb_mask([[-1.0, -1.0]], [[0.0, 0.0]], [[0.0, 1e-13]], [[1, 1]], mu=0.0)
    assert keep == [[1, 1]] and metrics["frac_clipped"] == 0.0
    assert clipb_mask([[-1.0, -1.0]], [[0.0, 0.0]], [[0.0, 1e-3]], [[1, 1]], mu=0.0)[0] == [[0, 1]]


def test_only_valid_tokens_count_and_zero_advantages_are_kept():
    # the third token of row 0 is not the model's (mask 0; its entropy would move the mean); row 1's advantage is 0
    advantages = [[-1.0, -1.0, -1.0], [0.0, 0.0]]
    log_probs, entropy = [[0.0] * 3, [0.0] * 2], [[0.0, 2.0, 100.0], [0.0, 2.0]]
    keep, metrics = clipb_mask(advantages, log_probs, entropy, [[1, 1, 0], [1, 1]], mu=0.5)
    # S over the valid tokens [0, 2, 0, 2]: mean 1, std 1; mu 0.5 drops the negative token at S = 0 only
    assert metrics["ES"] == pytest.approx(1.0) and metrics["varS"] == pytest.approx(1.0)
    assert keep == [[0, 1, 1], [1, 1]]  # rows as long as their masks; a token off the mask is never dropped
    assert metrics["frac_clipped"] == pytest.approx(0.25) and metrics["frac_clipped_neg"] == pytest.approx(0.5)
    # no positive token at all: 0 clipped (upstream's 1 - 0 / max(1, 0) would say every one was)
    assert metrics["frac_clipped_pos"] == 0.0


def test_the_mask_is_taken_over_the_whole_batch_not_per_row():
    # each row alone is flat; together the rows differ
    rows = ([[-1.0], [-1.0]], [[0.0], [0.0]], [[0.0], [4.0]], [[1], [1]])
    assert clipb_mask(*rows, mu=0.5)[0] == [[0], [1]]
    assert [clipb_mask(*(part[i : i + 1] for part in rows), mu=0.5)[0] for i in (0, 1)] == [[[1]], [[1]]]


ROW = st.integers(1, 5)
VALUE = st.floats(-3.0, 3.0, allow_nan=False, width=32)


@st.composite
def batches(draw):
    """Rows of (advantage, log-prob, entropy, mask) per token: advantages of either sign or zero."""
    lengths = draw(st.lists(ROW, min_size=1, max_size=4))
    make = lambda values: [draw(st.lists(values, min_size=n, max_size=n)) for n in lengths]  # noqa: E731
    return (
        make(st.sampled_from([-1.5, -0.5, 0.0, 0.5, 1.5])),
        make(st.floats(-6.0, 0.0, allow_nan=False, width=32)),
        make(st.floats(0.0, 4.0, allow_nan=False, width=32)),
        make(st.sampled_from([0, 1, 1])),
    )


@settings(max_examples=200, deadline=None)
@given(batches(), st.floats(0.0, 4.0, allow_nan=False))
def test_only_negative_tokens_of_the_lowest_signal_are_ever_dropped(batch, mu):
    advantages, log_probs, entropy, masks = batch
    keep, metrics = clipb_mask(advantages, log_probs, entropy, masks, mu=mu)
    assert [len(row) for row in keep] == [len(row) for row in masks]
    tokens = [
        (a, math.exp(lp) * (h + lp), k)
        for row in zip(advantages, log_probs, entropy, masks, keep)
        for a, lp, h, m, k in zip(*row)
        if m
    ]
    dropped = [s for a, s, k in tokens if not k]
    assert all(a < 0 for a, _, k in tokens if not k)  # a positive or zero advantage is never dropped
    assert all(k for row, mask in zip(keep, masks) for k, m in zip(row, mask) if not m)  # nor a token off the mask
    kept_negative = [s for a, s, k in tokens if k and a < 0]
    if dropped and kept_negative:  # the signal ranks them: every dropped one is below every kept negative one
        assert max(dropped) <= min(kept_negative) + 1e-5
    assert metrics["frac_clipped"] == pytest.approx(len(dropped) / len(tokens) if tokens else 0.0, abs=1e-6)
    assert metrics["frac_clipped_pos"] == 0.0
    # a larger mu never drops more
    assert sum(map(sum, clipb_mask(advantages, log_probs, entropy, masks, mu=mu + 1.0)[0])) >= sum(map(sum, keep))
