"""M2PO against values worked by hand from its definition (Trinity-RFT's m2po_policy_loss.py at 3a41dc2, the paper's
Algorithm 1): the second-moment mask over the whole batch, only in PPO's active quadrants, the metrics it reports;
the loss through verl's registry as the trainer reaches it (token-mean over every valid token, the clamp bounding the
value and not the gradient), and the trainer refusing recomputed old log-probs."""

import math
from types import SimpleNamespace

import pytest

from tests.runtime.trainer.algos.test_algos import loss
from trinity.config.algorithms.losses import POLICY_LOSSES
from trinity.config.algorithms.presets import ALGORITHMS
from trinity.runtime.trainer import functions
from trinity.runtime.trainer.algos.m2po import m2po_mask


def test_the_largest_trust_region_tokens_are_masked_until_the_second_moment_fits():
    keep, metrics = m2po_mask([[0.1, 0.2, 0.3]], [[1.0, 1.0, 1.0]], [[1, 1, 1]], m2_threshold=0.04)
    assert keep == [[1, 1, 0]]  # mean r^2 0.0467 > 0.04; without 0.3: 0.025
    assert metrics == pytest.approx(
        {"m2_before": 0.14 / 3, "m2_after": 0.025, "masked_fraction": 1 / 3, "trust_region_fraction": 1.0}
    )


def test_only_ppos_active_quadrants_are_constrained_and_only_valid_tokens():
    # A < 0 with r > 0 and A > 0 with r < 0 are outside the trust region; a padded token never counts
    ratios, advantages = [[1.0, -1.0, 1.0, -1.0, 2.0]], [[-1.0, 1.0, 1.0, -1.0, 1.0]]
    keep, metrics = m2po_mask(ratios, advantages, [[1, 1, 1, 1, 0]], m2_threshold=0.5)
    assert keep == [[1, 1, 0, 0, 1]]  # the two in the region (r^2 = 1 each) both go: 1 > 0.5
    assert metrics["trust_region_fraction"] == 0.5 and metrics["masked_fraction"] == 0.5
    assert m2po_mask(ratios, advantages, [[1, 1, 1, 1, 0]], m2_threshold=1.0)[0] == [[1] * 5]  # within the bound


def test_the_mask_is_taken_over_the_whole_batch_not_per_row():
    r = [math.sqrt(0.01), math.sqrt(0.09), math.sqrt(0.05)]
    whole, _ = m2po_mask([r], [[1.0] * 3], [[1] * 3], m2_threshold=0.04)
    split = [m2po_mask([r[:2]], [[1.0] * 2], [[1] * 2], 0.04)[0][0], m2po_mask([r[2:]], [[1.0]], [[1]], 0.04)[0][0]]
    assert whole == [[1, 0, 1]] and split == [[1, 0], [0]]  # the sort is over every token of the batch
    rows, _ = m2po_mask([r[:1], r[1:]], [[1.0], [1.0, 1.0]], [[1], [1, 1]], 0.04)
    assert rows == [[1], [0, 1]]  # rows are one batch


def test_non_finite_ratios_are_refused():
    with pytest.raises(ValueError, match="non-finite"):
        m2po_mask([[float("nan")]], [[1.0]], [[1]])


def test_the_loss_averages_over_every_valid_token_and_masked_ones_add_nothing():
    # the trainer zeroes a masked token's advantage: [1, 0] is token 1 kept, token 2 masked
    value, grad = loss("m2po", [0.0, 1.0], [0.0, 0.0], [1.0, 0.0])
    assert value == pytest.approx(-0.5) and grad == pytest.approx([-0.5, 0.0])
    # token-mean whatever the run's mode: seq-mean-token-sum would give -1
    assert loss("m2po", [0.0, 1.0], [0.0, 0.0], [1.0, 0.0], agg="seq-mean-token-sum")[0] == pytest.approx(-0.5)


def test_the_clamp_bounds_the_ratio_not_its_gradient():
    value, grad = loss("m2po", [25.0], [0.0], [-1.0])
    assert value == pytest.approx(math.exp(20.0), rel=1e-5) and grad == pytest.approx([math.exp(20.0)], rel=1e-5)
    assert loss("m2po", [3.0], [0.0], [-1.0], log_ratio_clip=1.0)[0] == pytest.approx(math.e, rel=1e-5)


def test_the_preset_and_the_entry():
    assert ALGORITHMS["m2po"].functions == {
        "sample_strategy": "default",
        "advantage_fn": "grpo",
        "policy_loss_fn": "m2po",
        "kl_penalty_fn": "none",
        "kl_loss_fn": "none",
        "entropy_loss_fn": "none",
    }
    assert ALGORITHMS["m2po"].loss_agg_mode == "token-mean" and POLICY_LOSSES["m2po"].batch_mask == "m2po_mask"


def test_the_trainer_prepares_m2po_with_the_rollouts_log_probs():
    """Recomputed old log-probs are refused at validate (tests/config/derive/test_buffer.py); the trainer prepares
    M2PO's loss and its batch mask."""
    algorithm = SimpleNamespace(policy_loss_fn="m2po", policy_loss_fn_args={}, advantage_fn="grpo")
    functions.prepare(SimpleNamespace(**vars(algorithm), bypass_old_logprobs=True))
