"""M2PO (second-moment trust policy optimisation, Zheng et al. 2025, openreview IIgl5MWelz; Trinity-RFT's `m2po`,
trinity/algorithm/policy_loss_fn/m2po_policy_loss.py at 3a41dc2).

Its mask (Algorithm 1) is taken once over the whole optimizer batch (trinity's update is one: the train batch), from
the current policy's log-ratio r to the rollout's log-probs: among the trust-region tokens (advantage > 0 with r > 0,
or advantage < 0 with r < 0), the ones with the largest r^2 are masked until the mean r^2 of the rest is at most
m2_threshold; other tokens are never masked. The loss is token-mean of -A x exp(clamp(r, +-log_ratio_clip)) over all
valid tokens, the masked ones adding 0 (the paper's denominator); the clamp bounds the value, not the gradient. The
trainer applies the mask by zeroing the masked tokens' advantages (step.py), which is that loss exactly.
"""

import math

import torch

from ..functions import own_loss


def m2po_mask(
    log_ratio: list[list[float]],
    advantages: list[list[float]],
    masks: list[list[int]],
    m2_threshold: float = 0.04,
    **_: object,
) -> tuple[list[list[int]], dict[str, float]]:
    """Per token 1 (kept) or 0 (masked) over the whole batch, and the mask's metrics (m2_before, m2_after,
    masked_fraction, trust_region_fraction)."""
    flat = [
        (row, col, r)
        for row, (ratios, advs, mask) in enumerate(zip(log_ratio, advantages, masks))
        for col, (r, a, m) in enumerate(zip(ratios, advs, mask))
        if m and ((a > 0 and r > 0) or (a < 0 and r < 0))
    ]
    if not all(math.isfinite(r) for ratios, mask in zip(log_ratio, masks) for r, m in zip(ratios, mask) if m):
        raise ValueError("M2PO received non-finite log-probability ratios")
    keep = [[1] * len(row) for row in log_ratio]
    second = torch.tensor([r * r for _, _, r in flat], dtype=torch.float64)
    before = float(second.mean()) if len(flat) else 0.0
    kept = len(flat)
    if flat and before > m2_threshold:
        ordered, order = torch.sort(second, stable=True)
        means = torch.cumsum(ordered, 0) / torch.arange(1, len(flat) + 1, dtype=torch.float64)
        kept = int((means <= m2_threshold).sum())
        for index in order[kept:].tolist():
            row, col, _ = flat[index]
            keep[row][col] = 0
        second = ordered[:kept]
    valid = sum(map(sum, masks))
    metrics = {
        "m2_before": before,
        "m2_after": float(second.mean()) if kept else 0.0,
        "masked_fraction": (len(flat) - kept) / valid if valid else 0.0,
        "trust_region_fraction": len(flat) / valid if valid else 0.0,
    }
    return keep, metrics


@own_loss("m2po")
def m2po_loss(log_prob, old_log_prob, advantages, response_mask, agg, *, log_ratio_clip: float = 20.0, **_):
    """token-mean(-A x exp(r clamped in value)); the advantages carry the batch's mask (0 on masked tokens)."""
    log_ratio = log_prob - old_log_prob
    clamped = log_ratio + (torch.clamp(log_ratio, -log_ratio_clip, log_ratio_clip) - log_ratio).detach()
    ratio = torch.exp(clamped)
    loss = agg(-advantages * ratio, "token-mean")  # its denominator is every valid token, whatever the run's mode
    mask = response_mask.float()
    count = mask.sum().clamp(min=1)
    return loss, {
        "actor/ppo_kl": float((-clamped.detach() * mask).sum() / count),
        "actor/ratio_mean": float((ratio.detach() * mask).sum() / count),
    }
