"""SAPO (soft adaptive policy optimisation, arXiv 2511.20347; Trinity-RFT's `sapo`): a sigmoid gate on the ratio,
with its own temperature for positive and negative advantages, instead of a hard clip. Unlike verl's `sapo`,
this one aggregates by loss_agg_mode, as Trinity-RFT's does."""

import torch

from ..functions import own_loss


def soft_gate(ratio: torch.Tensor, advantages: torch.Tensor, tau_pos: float, tau_neg: float) -> torch.Tensor:
    """sigmoid(tau * (ratio - 1)) * 4 / tau, with tau = tau_pos where the advantage is positive, else tau_neg."""
    tau = torch.where(advantages > 0, torch.full_like(ratio, tau_pos), torch.full_like(ratio, tau_neg))
    return torch.sigmoid(tau * (ratio - 1)) * (4.0 / tau)


@own_loss("sapo")
def sapo_loss(log_prob, old_log_prob, advantages, response_mask, agg, *, tau_pos=1.0, tau_neg=1.05, **_):
    """agg(-A * sg(gate(ratio)) * log pi)."""
    ratio = torch.exp(log_prob - old_log_prob)
    gate = soft_gate(ratio, advantages, tau_pos, tau_neg).detach()
    loss = agg(-advantages * gate * log_prob)
    mask = response_mask.float()
    return loss, {"actor/sapo_gate": float((gate * mask).sum() / mask.sum().clamp(min=1))}
