"""TOPR (tapered off-policy REINFORCE, arXiv 2503.14286; Trinity-RFT's `topr`): rollouts at or below the threshold
are weighted by their ratio to the rollout policy clipped to [0, 1], the others by 1 (the weight is not
differentiated)."""

import torch

from ..functions import own_loss


@own_loss("topr")
def topr_loss(log_prob, old_log_prob, advantages, response_mask, agg, *, advantage_threshold: float = 0.0, **_):
    """agg(-sg(alpha) * A * log pi), alpha = clip(pi / mu, 0, 1) where A <= threshold, else 1."""
    ratio = torch.exp(log_prob - old_log_prob)
    alpha = torch.where(advantages <= advantage_threshold, ratio.clamp(0.0, 1.0), torch.ones_like(ratio)).detach()
    loss = agg(-alpha * advantages * log_prob)
    mask = response_mask.float()
    return loss, {"actor/topr_alpha": _mean(alpha, mask), "actor/topr_ratio": _mean(ratio.detach(), mask)}


def _mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    return float((values * mask).sum() / mask.sum().clamp(min=1))
