"""Per-task reward statistics shared by the group estimators: one scalar reward per rollout, grouped by task."""

from collections import defaultdict

import numpy as np
import torch


def scores(token_level_rewards: torch.Tensor) -> torch.Tensor:
    """Each rollout's reward: the sum of its token rewards (a KL penalty included)."""
    return token_level_rewards.sum(dim=-1)


def groups(index: np.ndarray) -> dict[object, list[int]]:
    """Task -> the batch rows of its rollouts, in batch order."""
    out: dict[object, list[int]] = defaultdict(list)
    for row, task in enumerate(index):
        out[task].append(row)
    return out


def on_tokens(per_rollout: torch.Tensor, response_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A per-rollout advantage on each of its response tokens, as (advantages, returns)."""
    advantages = per_rollout.unsqueeze(-1) * response_mask
    return advantages, advantages.clone()
