"""REINFORCE (Trinity-RFT's `reinforce` advantage, TOPR's preset): the rollout's own reward, no baseline."""

import torch

from ..functions import register_advantage
from . import _groups


@register_advantage("reinforce")
def reinforce_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, **_: object):
    """advantage = reward on every response token."""
    with torch.no_grad():
        return _groups.on_tokens(_groups.scores(token_level_rewards), response_mask)
