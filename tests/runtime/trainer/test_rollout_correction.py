"""Rollout correction (trinity/runtime/trainer/rollout_correction.py) against values worked by hand from verl 0.9.1's
definitions (verl/trainer/ppo/rollout_corr_helper.py): IS weights per token and per sequence, truncated or IcePop,
normalised over the batch; each rejection option's statistic, level and bounds; the metrics under verl's names.
Properties: weights within their bounds, rejected tokens adding nothing to a loss. And agreement with verl's own
function on random batches."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trinity.config.algorithms.rollout_correction import REJECTIONS, rejection_bounds, rejection_options
from trinity.config.schema.algorithm import RolloutCorrectionConfig
from trinity.runtime.trainer.rollout_correction import correct, is_weights, rejection

LN2, LN4 = math.log(2.0), math.log(4.0)


def ratios(*rows: list[float]) -> torch.Tensor:
    """A log-ratio matrix whose entries are the logs of the ratios given (0: a padded place)."""
    return torch.tensor([[math.log(v) if v else 0.0 for v in row] for row in rows])


def approx(tensor: torch.Tensor, rows: list[list[float]]) -> bool:
    return torch.allclose(tensor, torch.tensor(rows), atol=1e-6)


# --- IS weights ---------------------------------------------------------------------------------------------------

TOKENS = ratios([4.0, 0.5, 1.0, 3.0])
TOKEN_MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0]])


def test_token_weights_are_each_tokens_ratio_truncated_at_the_threshold_and_zero_off_the_mask():
    weights, metrics = is_weights(TOKENS, TOKEN_MASK, "token", (None, 2.0))
    assert approx(weights, [[2.0, 0.5, 1.0, 0.0]])
    assert metrics["rollout_is_mean"] == pytest.approx(3.5 / 3)
    assert (metrics["rollout_is_max"], metrics["rollout_is_min"]) == pytest.approx((2.0, 0.5))
    # above the bound: 4 (of 3 tokens); below its reciprocal 0.5: none (0.5 is not below)
    assert metrics["rollout_is_ratio_fraction_high"] == pytest.approx(1 / 3)
    assert metrics["rollout_is_ratio_fraction_low"] == 0.0
    # ESS: 1 / mean((w / mean w)^2) = 1 / mean((12/7)^2, (3/7)^2, (6/7)^2) = 7/9
    assert metrics["rollout_is_eff_sample_size"] == pytest.approx(7 / 9, rel=1e-5)
    assert not weights.requires_grad


SEQUENCES = ratios([2.0, 2.0, 0.0], [0.5, 1.0, 1.0])
SEQUENCE_MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])


def test_sequence_weights_are_the_product_of_the_sequences_ratios_on_each_of_its_tokens():
    weights, metrics = is_weights(SEQUENCES, SEQUENCE_MASK, "sequence", (None, 3.0))
    assert approx(weights, [[3.0, 3.0, 0.0], [0.5, 0.5, 0.5]])  # 2 x 2 = 4, truncated at 3
    assert (metrics["rollout_is_max"], metrics["rollout_is_min"]) == pytest.approx((4.0, 0.5))  # before truncating
    assert metrics["rollout_is_mean"] == pytest.approx((3 + 3 + 0.5 * 3) / 5)  # over the tokens
    assert metrics["rollout_is_ratio_fraction_high"] == 0.5  # of the sequences: 4 > 3
    assert metrics["rollout_is_ratio_fraction_low"] == 0.0  # 0.5 is not below 1/3


def test_a_lower_upper_threshold_zeroes_the_weights_outside_it_icepop():
    weights, metrics = is_weights(TOKENS, TOKEN_MASK, "token", (0.6, 3.0))
    assert approx(weights, [[0.0, 0.0, 1.0, 0.0]])  # 4 above, 0.5 below, 1 kept
    assert metrics["rollout_is_oob_ratio"] == pytest.approx(2 / 3)
    assert metrics["rollout_is_ratio_fraction_low"] == pytest.approx(1 / 3)  # below 0.6, not below 1/3
    seq, _ = is_weights(SEQUENCES, SEQUENCE_MASK, "sequence", (0.4, 3.0))
    assert approx(seq, [[0.0, 0.0, 0.0], [0.5, 0.5, 0.5]])


def test_batch_normalising_divides_by_the_mean_token_weight_or_the_mean_sequence_weight():
    tokens, metrics = is_weights(TOKENS, TOKEN_MASK, "token", (None, 2.0), normalize=True)
    assert approx(tokens, [[12 / 7, 3 / 7, 6 / 7, 0.0]]) and metrics["rollout_is_batch_norm_factor"] == pytest.approx(
        3.5 / 3
    )
    # sequences weigh 3 and 0.5 whatever their lengths: the mean is 1.75, not the token mean 1.5
    seqs, metrics = is_weights(SEQUENCES, SEQUENCE_MASK, "sequence", (None, 3.0), normalize=True)
    assert approx(seqs, [[12 / 7, 12 / 7, 0.0], [2 / 7, 2 / 7, 2 / 7]])
    assert metrics["rollout_is_batch_norm_factor"] == pytest.approx(1.75)
    assert metrics["rollout_is_mean"] == pytest.approx(1.5)  # the metrics are of the weights before normalising


def test_the_exponent_is_clamped_at_twenty():
    huge = torch.tensor([[30.0, -30.0]])
    weights, _ = is_weights(huge, torch.ones(1, 2), "token", (None, 1e12))
    assert weights[0, 0] == pytest.approx(math.exp(20)) and weights[0, 1] == pytest.approx(math.exp(-20))


# --- rejection ----------------------------------------------------------------------------------------------------


def kept(log_ratio: torch.Tensor, mask: torch.Tensor, rs: str, threshold) -> list[list[float]]:
    options = rejection_options(rs)
    return rejection(log_ratio, mask, rejection_bounds(options, threshold))[0].mul(mask).tolist()


def test_token_k1_keeps_minus_the_log_ratio_within_the_logs_of_its_bounds():
    row = ratios([2.0, 2.1, 0.5, 0.45, 1.3, 0.7])
    mask = torch.ones(1, 6)
    # one number u: 1/u_u, the ratio within [0.5, 2]
    assert kept(row, mask, "token_k1", 2.0) == [[1, 0, 1, 0, 1, 1]]
    # verl's k1 is -log r kept within [log lower, log upper]: "0.8_1.5" keeps ratios in [1/1.5, 1/0.8] = [0.67, 1.25]
    assert kept(row, mask, "token_k1", "0.8_1.5") == [[0, 0, 0, 0, 0, 1]]


def test_token_k2_and_k3_keep_their_divergence_at_most_the_bound():
    row = ratios([1.5, 0.6, 1.2])  # r = 0.405, -0.511, 0.182
    mask = torch.ones(1, 3)
    assert kept(row, mask, "token_k2", 0.09) == [[1, 0, 1]]  # r^2/2 = 0.0822, 0.1305, 0.0166
    assert kept(row, mask, "token_k3", 0.09) == [[0, 0, 1]]  # e^r - 1 - r = 0.0945, 0.1108, 0.0177


# Two sequences, a padded place of ratio 4 in each that no statistic may read. Per token:
#   C: ratios 1.5, 1.0 -> k1 -0.405, 0; k2 0.0822, 0; k3 0.0945, 0
#   D: ratios 1.2 x 3  -> k1 -0.182 each; k2 0.0166 each; k3 0.0177 each
SEQS = ratios([1.5, 1.0, 4.0, 4.0], [1.2, 1.2, 1.2, 4.0])
SEQS_MASK = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
C_KEPT, D_KEPT = [1, 1, 0, 0], [1, 1, 1, 0]
# option, threshold -> which of C and D are kept (a sequence option keeps or drops the whole sequence)
SEQUENCE_CASES = {
    ("seq_sum_k1", "0.6_1.7"): (True, False),  # sums -0.405, -0.547: [log 0.6, log 1.7] = [-0.511, 0.531]
    ("seq_mean_k1", "0.6_1.7"): (True, True),  # means -0.203, -0.182
    ("seq_sum_k2", 0.03): (False, False),  # sums 0.0822, 0.0498
    ("seq_sum_k2", 0.05): (False, True),
    ("seq_mean_k2", 0.03): (False, True),  # means 0.0411, 0.0166
    ("seq_mean_k2", 0.045): (True, True),
    ("seq_max_k2", 0.03): (False, True),  # maxima 0.0822, 0.0166
    ("seq_max_k2", 0.045): (False, True),
    ("seq_sum_k3", 0.06): (False, True),  # sums 0.0945, 0.0531
    ("seq_mean_k3", 0.05): (True, True),  # means 0.0473, 0.0177
    ("seq_max_k3", 0.05): (False, True),  # maxima 0.0945, 0.0177
    ("seq_max_k3", 0.01): (False, False),
}


@pytest.mark.parametrize("option,threshold", SEQUENCE_CASES, ids=lambda v: str(v))
def test_a_sequence_option_aggregates_its_tokens_statistic_and_keeps_or_drops_the_sequence(option, threshold):
    keep_c, keep_d = SEQUENCE_CASES[option, threshold]
    want = [C_KEPT if keep_c else [0] * 4, D_KEPT if keep_d else [0] * 4]
    assert kept(SEQS, SEQS_MASK, option, threshold) == want


def test_every_option_is_one_of_verls_and_has_a_case():
    tried = {option for option, _ in SEQUENCE_CASES} | {"token_k1", "token_k2", "token_k3"}
    assert tried == set(REJECTIONS) and len(REJECTIONS) == 11


def test_several_options_must_all_keep_a_token_and_each_reports_what_it_rejected():
    options = rejection_options("token_k2, seq_sum_k1,token_k2")  # duplicates dropped, in order
    assert options == ["token_k2", "seq_sum_k1"]
    keep, metrics = rejection(SEQS, SEQS_MASK, rejection_bounds(options, "0.05,0.6_1.7"))
    # token_k2 rejects C's first token (0.0822 > 0.05); seq_sum_k1 rejects all of D
    assert (keep * SEQS_MASK).tolist() == [[0, 1, 0, 0], [0, 0, 0, 0]]
    assert metrics["rollout_rs_token_k2_masked_fraction"] == pytest.approx(1 / 5)
    assert metrics["rollout_rs_token_k2_seq_masked_fraction"] == pytest.approx(1 / 2)
    assert metrics["rollout_rs_seq_sum_k1_masked_fraction"] == pytest.approx(3 / 5)
    assert metrics["rollout_rs_masked_fraction"] == pytest.approx(4 / 5)
    assert metrics["rollout_rs_seq_masked_fraction"] == 1.0
    # the statistic: seq_sum_k1's per sequence (-0.405 and -0.547), its share above and below the log bounds
    assert metrics["rollout_rs_seq_sum_k1_max"] == pytest.approx(-math.log(1.5), abs=1e-6)
    assert metrics["rollout_rs_seq_sum_k1_min"] == pytest.approx(-3 * math.log(1.2), abs=1e-6)
    assert (metrics["rollout_rs_seq_sum_k1_fraction_low"], metrics["rollout_rs_seq_sum_k1_fraction_high"]) == (0.5, 0)
    # one threshold for two options applies to both
    both, _ = rejection(SEQS, SEQS_MASK, rejection_bounds(["seq_mean_k2", "seq_max_k2"], 0.045))
    assert (both * SEQS_MASK).tolist() == [[0, 0, 0, 0], D_KEPT]


# --- the whole correction -----------------------------------------------------------------------------------------


def config(**keys) -> RolloutCorrectionConfig:
    return RolloutCorrectionConfig(**keys)


def test_the_off_policy_gap_is_measured_as_verl_names_it():
    old, rollout, mask = torch.tensor([[-1.0, -1.0]]), torch.tensor([[-2.0, -1.0]]), torch.ones(1, 2)
    found = correct(old, rollout, mask, config())
    assert found.weights is None and found.keep.tolist() == [[1.0, 1.0]]
    e = math.e
    want = {
        "kl": -0.5,  # mean of log mu - log pi_old
        "k3_kl": (e - 2) / 2,
        "training_ppl": e,
        "training_log_ppl": 1.0,
        "rollout_ppl": math.exp(1.5),
        "rollout_log_ppl": 1.5,
        "log_ppl_diff": -0.5,
        "log_ppl_abs_diff": 0.5,
        "log_ppl_diff_max": -0.5,
        "log_ppl_diff_min": -0.5,
        "ppl_ratio": math.exp(-0.5),
        "chi2_token": (e**2 + 1) / 2 - 1,
        "chi2_seq": e**2 - 1,
    }
    assert found.metrics == pytest.approx({f"rollout_corr/{k}": v for k, v in want.items()}, rel=1e-5)


def test_correct_weighs_and_rejects_from_the_old_policy_against_the_rollouts():
    rollout = torch.zeros(2, 3)
    old = SEQUENCES  # log pi_old - log mu = the ratios' logs
    found = correct(
        old,
        rollout,
        SEQUENCE_MASK,
        config(rollout_is="token", rollout_is_threshold=1.5, rollout_rs="token_k1", rollout_rs_threshold=1.9),
    )
    assert approx(found.weights, [[1.5, 1.5, 0.0], [0.5, 1.0, 1.0]])
    assert (found.keep * SEQUENCE_MASK).tolist() == [[0, 0, 0], [0, 1, 1]]  # ratios 2 and 0.5 outside [1/1.9, 1.9]
    assert found.metrics["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(3 / 5)
    assert found.metrics["rollout_corr/rollout_is_mean"] == pytest.approx((1.5 + 1.5 + 0.5 + 1 + 1) / 5)
    assert all(name.startswith("rollout_corr/") for name in found.metrics)


def test_a_batch_with_no_token_to_train_is_left_as_it_is():
    found = correct(torch.zeros(1, 2), torch.ones(1, 2), torch.zeros(1, 2), config(rollout_is="token"))
    assert found.weights is None and found.keep.tolist() == [[1.0, 1.0]] and found.metrics == {}


# --- properties ---------------------------------------------------------------------------------------------------

BATCHES = st.integers(1, 4).flatmap(
    lambda rows: st.integers(1, 6).flatmap(
        lambda width: st.tuples(
            st.lists(st.lists(st.floats(-8, 0), min_size=width, max_size=width), min_size=rows, max_size=rows),
            st.lists(st.lists(st.floats(-8, 0), min_size=width, max_size=width), min_size=rows, max_size=rows),
            st.lists(
                st.lists(st.sampled_from([0.0, 1.0]), min_size=width, max_size=width), min_size=rows, max_size=rows
            ),
        )
    )
)


@settings(max_examples=150, deadline=None)
@given(BATCHES, st.sampled_from(["token", "sequence"]), st.floats(1.01, 10.0), st.floats(0.1, 0.99))
def test_weights_stay_within_their_bounds_and_off_the_mask_they_are_zero(batch, level, upper, lower):
    old, rollout, mask = (torch.tensor(part) for part in batch)
    log_ratio = (old - rollout) * mask
    truncated, _ = is_weights(log_ratio, mask, level, (None, upper)) if mask.any() else (torch.zeros_like(mask), {})
    assert bool(((truncated >= 0) & (truncated <= upper * (1 + 1e-6))).all())
    assert bool((truncated[mask == 0] == 0).all())
    if not mask.any():
        return
    icepop, _ = is_weights(log_ratio, mask, level, (lower, upper))
    inside = (icepop >= lower * (1 - 1e-6)) & (icepop <= upper * (1 + 1e-6))
    assert bool(((icepop == 0) | inside).all())


@settings(max_examples=150, deadline=None)
@given(BATCHES, st.sampled_from(sorted(REJECTIONS)), st.floats(0.01, 3.0), st.integers(0, 2**31 - 1))
def test_rejected_tokens_add_nothing_to_the_loss(batch, option, threshold, seed):
    """Whatever the policy's log-probs and advantages on a rejected token, verl's token-mean loss over the corrected
    mask is the same: the token is out of the loss and of its denominator."""
    from verl.trainer.ppo.core_algos import agg_loss

    old, rollout, mask = (torch.tensor(part) for part in batch)
    spec = f"{min(threshold, 0.9)}_{1 / min(threshold, 0.9)}" if REJECTIONS[option].ratio_bounds else threshold
    found = correct(old, rollout, mask, config(rollout_is="token", rollout_rs=option, rollout_rs_threshold=spec))
    trained = mask * found.keep
    assert bool(((found.keep == 0) | (found.keep == 1)).all())
    weights = found.weights if found.weights is not None else torch.ones_like(mask)
    generator = torch.Generator().manual_seed(seed)
    log_prob, advantages = torch.randn(mask.shape, generator=generator), torch.randn(mask.shape, generator=generator)
    noise = torch.randn(mask.shape, generator=generator) * 100 * (1 - trained)  # only where nothing is trained

    def loss(lp, adv):
        return agg_loss(-adv * weights * torch.exp(lp - old), trained, "token-mean")

    if trained.any():
        assert torch.allclose(loss(log_prob, advantages), loss(log_prob + noise, advantages + noise), atol=1e-5)


# --- against verl's own function ---------------------------------------------------------------------------------

VERL_CASES = [
    dict(rollout_is="token", rollout_is_threshold=2.0),
    dict(rollout_is="sequence", rollout_is_threshold="0.5_3.0", rollout_is_batch_normalize=True),
    dict(rollout_is="token", rollout_is_threshold=1.5, rollout_is_batch_normalize=True),
    dict(rollout_rs="token_k1,seq_mean_k3", rollout_rs_threshold="0.8_1.25,0.02"),
    dict(rollout_is="sequence", rollout_rs="seq_sum_k1,seq_max_k2", rollout_rs_threshold="0.5_2.0,0.1"),
    dict(
        rollout_rs="token_k2,token_k3,seq_sum_k2,seq_sum_k3,seq_mean_k2,seq_max_k3",
        rollout_rs_threshold=0.05,
    ),
    dict(),
]


@pytest.mark.parametrize("keys", VERL_CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()) or "metrics")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_weights_mask_and_metrics_are_verls(keys, seed):
    """verl's compute_rollout_correction_and_rejection_mask on the same random batch: the same weights, the same
    corrected mask, and every metric trinity logs equal to verl's of that name."""
    helper = pytest.importorskip("verl.trainer.ppo.rollout_corr_helper")
    generator = torch.Generator().manual_seed(seed)
    old = -torch.rand(6, 9, generator=generator) * 3
    rollout = old + torch.randn(6, 9, generator=generator) * 0.3
    mask = (torch.rand(6, 9, generator=generator) > 0.25).long()
    mask[0] = 0  # an empty response
    cfg = config(**keys)
    weights, theirs_mask, theirs = helper.compute_rollout_correction_and_rejection_mask(
        old,
        rollout,
        mask,
        cfg.rollout_is,
        cfg.rollout_is_threshold,
        cfg.rollout_is_batch_normalize,
        cfg.rollout_rs,
        cfg.rollout_rs_threshold,
    )
    found = correct(old, rollout, mask, cfg)
    if cfg.rollout_is is None:
        assert weights is None and found.weights is None
    else:
        assert torch.allclose(weights.batch["rollout_is_weights"] * mask, found.weights * mask, atol=1e-5)
    assert torch.equal(theirs_mask, (mask * found.keep).to(mask.dtype))
    assert len(found.metrics) > 12 and set(found.metrics) <= set(theirs)
    assert found.metrics == pytest.approx({k: theirs[k] for k in found.metrics}, rel=1e-4, abs=1e-5)
