"""AsymRE (asymmetric REINFORCE, Trinity-RFT's `asymre`): the group's mean reward shifted by baseline_shift is the
baseline; trained with the OPMD loss."""

import numpy as np
import torch

from ..functions import register_advantage
from . import _groups


@register_advantage("asymre")
def asymre_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    baseline_shift: float = -0.1,
    **_: object,
):
    """advantage = reward - (the group's mean reward + baseline_shift); a group of one has baseline 0."""
    with torch.no_grad():
        rewards = _groups.scores(token_level_rewards).float()
        out = rewards.clone()
        for rows in _groups.groups(index).values():
            if len(rows) > 1:
                out[rows] = rewards[rows] - (rewards[rows].mean() + baseline_shift)
        return _groups.on_tokens(out, response_mask)
