"""OPMD (online policy mirror descent, Trinity-RFT's `opmd`): a group baseline, and a policy-gradient loss on the
current log-probs damped by 1 / (1 + tau), with no ratio to the old policy."""

import math

import numpy as np
import torch

from ..functions import own_loss, register_advantage
from . import _groups


def baseline(rewards: torch.Tensor, opmd_baseline: str, tau: float) -> torch.Tensor:
    """The group's baseline: its mean reward, or its log-average-exp at temperature tau; 0 for a group of one."""
    if len(rewards) == 1:
        return torch.tensor(0.0)
    if opmd_baseline == "mean":
        return rewards.mean()
    return tau * (torch.logsumexp(rewards / tau, dim=-1) - math.log(len(rewards)))


@register_advantage("opmd")
def opmd_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    opmd_baseline: str = "mean",
    tau: float = 1.0,
    **_: object,
):
    """advantage = reward - the group's baseline."""
    with torch.no_grad():
        rewards = _groups.scores(token_level_rewards).float()
        out = rewards.clone()
        for rows in _groups.groups(index).values():
            out[rows] = rewards[rows] - baseline(rewards[rows], opmd_baseline, tau)
        return _groups.on_tokens(out, response_mask)


@own_loss("opmd")
def opmd_loss(log_prob, old_log_prob, advantages, response_mask, agg, *, tau: float = 1.0, **_):
    """agg(-advantage * log pi) / (1 + tau)."""
    loss = agg(-advantages * log_prob) / (1.0 + tau)
    return loss, {"actor/opmd_loss": loss.detach().item()}
