"""Rollout correction on a batch: importance-sampling weights and a rejection mask from the trainer's recomputed old
log-probs and the rollout engine's, with verl 0.9.1's semantics (verl/trainer/ppo/rollout_corr_helper.py: what
`compute_rollout_correction_and_rejection_mask` computes in verl's decoupled mode), written here.

With r = log pi_old - log pi_rollout per token (0 outside the response mask):

- IS weights (`rollout_is`): token: exp(r); sequence: exp(sum of r over the sequence), the same on each of its
  tokens; the exponent clamped to [-20, 20], zero outside the mask. Truncated at the threshold (TIS: min(w, upper)) or,
  for a "lower_upper" threshold, zeroed outside [lower, upper] (IcePop); with `rollout_is_batch_normalize`, divided by
  their mean over the batch (of the tokens', or of each sequence's mean). They multiply the policy loss's per-token
  losses (verl's `rollout_is_weights`) and carry no gradient.
- Rejection (`rollout_rs`): each option's statistic of r (clamped likewise) -- k1 = -r, k2 = r^2 / 2,
  k3 = exp(r) - 1 - r, per token or summed, averaged or maxed over a sequence's tokens -- kept within its bounds (k1:
  [log lower, log upper], else at most upper); a token is kept where every option keeps it (a sequence option keeps or
  rejects the whole sequence). Rejected tokens leave the response mask: no loss, no token count.
- Metrics, named as verl names them (`rollout_corr/` + its names): the weights' mean, extremes, share above and below
  the bounds and effective sample size; each rejection option's statistic and rejected shares; the off-policy gap
  (KL, perplexities, chi-squared). verl's std and per-sequence breakdowns of the weights are not logged.

The trainer's step (step.py `_rollout_correction`) calls `correct` once per batch, over the whole batch, before the
update: the same tensors on every rank would give the same answer.
"""

import math
from dataclasses import dataclass

import torch

from ...config.algorithms.rollout_correction import (
    REJECTIONS,
    Bounds,
    is_bounds,
    rejection_bounds,
    rejection_options,
)
from ...config.schema.algorithm import RolloutCorrectionConfig

SAFETY_BOUND = 20.0  # exponents clamped to [-20, 20] (verl's SAFETY_BOUND)
PREFIX = "rollout_corr/"


@dataclass
class Correction:
    """IS weights (None: not asked for), the kept tokens (1) of the response mask, and the metrics."""

    weights: torch.Tensor | None
    keep: torch.Tensor
    metrics: dict[str, float]


def correct(old: torch.Tensor, rollout: torch.Tensor, mask: torch.Tensor, cfg: RolloutCorrectionConfig) -> Correction:
    """The batch's correction from the old policy's (`old`) and the rollout engine's (`rollout`) per-token log-probs
    over `mask` (B x T, 1 on the tokens trained)."""
    mask = mask.float()
    if not mask.any():  # nothing trained: nothing to weigh or reject (verl raises)
        return Correction(None, torch.ones_like(mask), {})
    log_ratio = (old - rollout) * mask
    weights, metrics = None, {}
    if cfg.rollout_is is not None:
        weights, found = is_weights(
            log_ratio, mask, cfg.rollout_is, is_bounds(cfg.rollout_is_threshold), cfg.rollout_is_batch_normalize
        )
        metrics |= found
    keep = torch.ones_like(mask)
    if cfg.rollout_rs is not None:
        options = rejection_options(cfg.rollout_rs)
        keep, found = rejection(log_ratio, mask, rejection_bounds(options, cfg.rollout_rs_threshold))
        metrics |= found
    metrics |= offpolicy_metrics(old, rollout, mask)
    return Correction(weights, keep, {PREFIX + name: float(value) for name, value in metrics.items()})


def is_weights(
    log_ratio: torch.Tensor, mask: torch.Tensor, level: str, bounds: Bounds, normalize: bool = False
) -> tuple[torch.Tensor, dict[str, float]]:
    """The IS weights and their metrics (before normalising, as verl's)."""
    lower, upper = bounds
    if level == "token":
        raw = torch.exp(log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND))
    elif level == "sequence":
        per_seq = masked_sum(log_ratio, mask, -1).unsqueeze(-1)
        raw = torch.exp(per_seq.clamp(-SAFETY_BOUND, SAFETY_BOUND)).expand_as(log_ratio)
    else:
        raise ValueError(f"rollout_is {level!r} is neither token nor sequence")
    raw = raw * mask
    if lower is None:  # truncated IS
        weights = raw.clamp(max=upper)
    else:  # IcePop: outside the bounds a token weighs nothing
        weights = torch.where((raw >= lower) & (raw <= upper), raw, torch.zeros_like(raw))
    weights = weights.detach()
    metrics = _is_metrics(weights, raw, log_ratio, mask, level, bounds)
    if normalize:
        if level == "token":
            mean = masked_mean(weights, mask)
        else:
            seq_mask = (mask.sum(-1) > 0).float()
            mean = (masked_mean(weights, mask, -1) * seq_mask).sum() / seq_mask.sum().clamp_min(1e-8)
        if mean > 1e-8:
            weights = weights / mean
            metrics["rollout_is_batch_norm_factor"] = float(mean)
        else:
            metrics["rollout_is_batch_norm_factor"] = 1.0
    return weights, metrics


def _is_metrics(
    weights: torch.Tensor, raw: torch.Tensor, log_ratio: torch.Tensor, mask: torch.Tensor, level: str, bounds: Bounds
) -> dict[str, float]:
    lower, upper = bounds
    low = 1.0 / upper if lower is None else lower  # where "below" starts: the reciprocal of a TIS bound
    kept = mask.bool()
    metrics = {"rollout_is_mean": float(masked_mean(weights, mask))}
    if level == "sequence":
        per_seq = masked_sum(log_ratio, mask, -1)
        metrics["rollout_is_max"] = math.exp(min(float(per_seq.max()), SAFETY_BOUND))
        metrics["rollout_is_min"] = math.exp(float(per_seq.min()))
        metrics["rollout_is_ratio_fraction_high"] = float((per_seq > math.log(upper)).float().mean())
        metrics["rollout_is_ratio_fraction_low"] = float((per_seq < math.log(low)).float().mean())
    else:
        metrics["rollout_is_max"] = float(weights[kept].max())
        metrics["rollout_is_min"] = float(weights[kept].min())
        metrics["rollout_is_ratio_fraction_high"] = float(masked_mean((raw > upper).float(), mask))
        metrics["rollout_is_ratio_fraction_low"] = float(masked_mean((raw < low).float(), mask))
    clipped = weights.clamp(0.0, upper)
    normalised = clipped / (masked_mean(clipped, mask) + 1e-8)
    metrics["rollout_is_eff_sample_size"] = float(1.0 / masked_mean(normalised.square(), mask))
    if lower is not None:
        outside = (raw < lower) | (raw > upper)
        metrics["rollout_is_oob_ratio"] = float(masked_mean(outside.float(), mask))
    return metrics


def rejection(
    log_ratio: torch.Tensor, mask: torch.Tensor, bounds: dict[str, Bounds]
) -> tuple[torch.Tensor, dict[str, float]]:
    """The kept tokens (1) under every option of `bounds` (rejection_bounds), and the metrics."""
    safe = log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND)
    per_token = {"k1": -safe, "k2": 0.5 * safe.square(), "k3": torch.exp(safe) - 1.0 - safe}
    valid, seq_valid = mask.bool(), mask.sum(-1) > 0
    keep_all = torch.ones_like(mask)
    metrics: dict[str, float] = {}
    for option, (lower, upper) in bounds.items():
        entry = REJECTIONS[option]
        stat = _aggregate(per_token[entry.estimator], mask, entry.level)
        high = math.log(upper) if entry.ratio_bounds else upper
        keep = stat <= high
        if entry.ratio_bounds:
            keep = keep & (stat >= math.log(lower))
        if entry.level != "token":
            keep, stat = keep.unsqueeze(-1).expand_as(mask), stat.unsqueeze(-1).expand_as(mask)
        keep = keep.float()
        keep_all = keep_all * keep
        metrics |= _rs_metrics(option, stat, keep, mask, high, math.log(lower) if entry.ratio_bounds else None)
        seq_kept = ((keep > 0.5) | ~valid).all(-1)
        rejected_seqs = ((~seq_kept) & seq_valid).float().sum() / seq_valid.float().sum().clamp_min(1.0)
        metrics[f"rollout_rs_{option}_masked_fraction"] = float(masked_mean(1.0 - keep, mask))
        metrics[f"rollout_rs_{option}_seq_masked_fraction"] = float(rejected_seqs)
    metrics["rollout_rs_masked_fraction"] = float(masked_mean(1.0 - keep_all, mask))
    metrics["rollout_rs_seq_masked_fraction"] = float(((keep_all < 0.5) & valid).any(-1).float().mean())
    return keep_all, metrics


def _aggregate(values: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """A per-token statistic as the option reads it: per token, or each sequence's sum, mean or max (0 where the
    sequence has no token)."""
    if level == "token":
        return values
    if level == "sum":
        return masked_sum(values, mask, -1)
    if level == "mean":
        return masked_mean(values, mask, -1)
    peak = values.masked_fill(~mask.bool(), float("-inf")).max(-1).values
    return torch.where(torch.isinf(peak), torch.zeros_like(peak), peak)


def _rs_metrics(
    option: str, stat: torch.Tensor, keep: torch.Tensor, mask: torch.Tensor, high: float, low: float | None
) -> dict[str, float]:
    """An option's statistic: its mean over the tokens, its extremes and shares beyond the bounds (over the sequences
    for a sequence option, over the tokens for a token one)."""
    name = f"rollout_rs_{option}"
    valid = mask.bool()
    if REJECTIONS[option].level == "token":
        values = stat[valid]
    else:
        values = stat[:, 0][mask.sum(-1) > 0]
    return {
        f"{name}_mean": float(masked_mean(stat, mask)),
        f"{name}_max": float(values.max()),
        f"{name}_min": float(values.min()),
        f"{name}_fraction_high": float((values > high).float().mean()),
        f"{name}_fraction_low": float((values < low).float().mean()) if low is not None else 0.0,
    }


def offpolicy_metrics(old: torch.Tensor, rollout: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """The gap between the rollout policy and the trainer's (verl's compute_offpolicy_metrics): KL(rollout || old)
    directly and by k3, each policy's perplexity (the batch's mean of its sequences'), their log-perplexity gap, and
    chi-squared divergences per token and per sequence."""
    mean_old = masked_mean(old, mask, -1)
    mean_rollout = masked_mean(rollout, mask, -1)
    log_ratio = old - rollout
    safe = log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND)
    per_seq = masked_sum(log_ratio, mask, -1).clamp(-SAFETY_BOUND, SAFETY_BOUND)
    gap = mean_rollout - mean_old
    return {
        "training_ppl": float(torch.exp(-mean_old).mean()),
        "training_log_ppl": float((-mean_old).mean()),
        "kl": float(masked_mean(rollout - old, mask)),
        "k3_kl": float(masked_mean(torch.exp(log_ratio) - log_ratio - 1, mask)),
        "rollout_ppl": float(torch.exp(-mean_rollout).mean()),
        "rollout_log_ppl": float((-mean_rollout).mean()),
        "log_ppl_diff": float(gap.mean()),
        "log_ppl_abs_diff": float(gap.abs().mean()),
        "log_ppl_diff_max": float(gap.max()),
        "log_ppl_diff_min": float(gap.min()),
        "ppl_ratio": float(torch.exp(gap).mean()),
        "chi2_token": float(masked_mean(torch.exp(safe).square(), mask) - 1.0),
        "chi2_seq": float(torch.exp(2.0 * per_seq).mean() - 1.0),
    }


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """The sum over the mask's positions (what lies outside, even nan, is never read)."""
    kept = torch.where(mask.bool(), values, torch.zeros_like(values)) * mask
    return kept.sum() if dim is None else kept.sum(dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """The mean over the mask's positions (0 where there is none: verl's 1e-8 in the denominator)."""
    count = mask.sum() if dim is None else mask.sum(dim)
    return masked_sum(values, mask, dim) / (count + 1e-8)
