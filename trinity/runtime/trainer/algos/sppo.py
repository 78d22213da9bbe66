"""sPPO (arXiv 2108.05828; Trinity-RFT's `sppo`): the log-ratio times the advantage, on tokens whose ratio stays in
[1 / (1 + epsilon), 1 + epsilon]."""

import torch

from ..functions import own_loss


@own_loss("sppo")
def sppo_loss(log_prob, old_log_prob, advantages, response_mask, agg, *, epsilon: float = 0.3, **_):
    """agg(-A * (log pi - log mu) * in_range), in_range by the (not differentiated) ratio."""
    ratio = torch.exp(log_prob - old_log_prob).detach()
    in_range = (ratio >= 1 / (1 + epsilon)) & (ratio <= 1 + epsilon)
    loss = agg(-advantages * (log_prob - old_log_prob) * in_range.float())
    mask = response_mask.float()
    clipped = float(((~in_range).float() * mask).sum() / mask.sum().clamp(min=1))
    return loss, {"actor/pg_clipfrac": clipped}
