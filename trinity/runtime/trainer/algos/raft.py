"""RAFT (reward-ranked fine-tuning, arXiv 2304.06767; Trinity-RFT's `raft`): of each task's rollouts, the best
rewarded is trained on with the SFT loss, the others not at all. The "advantage" is that choice, a weight of 1 or 0
on every token of a response, which the trainer's SFT batch multiplies into its loss mask."""

import numpy as np
import torch

from ..functions import register_advantage
from . import _groups


@register_advantage("raft")
def raft_selection(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    min_reward: float | None = None,
    **_: object,
):
    """1 on the tokens of each task's highest-rewarded rollout (the first of equals), when its reward reaches
    `min_reward` (None: always); 0 elsewhere."""
    with torch.no_grad():
        rewards = _groups.scores(token_level_rewards).float()
        chosen = torch.zeros_like(rewards)
        for rows in _groups.groups(index).values():
            best = rows[int(torch.argmax(rewards[rows]))]  # argmax returns the first of equal maxima
            if min_reward is None or rewards[best] >= min_reward:
                chosen[best] = 1.0
        return _groups.on_tokens(chosen, response_mask)
