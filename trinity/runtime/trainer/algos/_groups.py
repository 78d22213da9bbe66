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


def row_mean_std(rewards: torch.Tensor, index: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's task's mean reward and unbiased reward std, for the whole batch at once; a task of one rollout has
    mean 0 and std 1. Tasks are told apart by their labels as given. Computed in float64: summed one after another in
    float32, a task's equal rewards (0.7 each, say) would have a mean a few ulps off them and a std of 1e-7, which
    epsilon (1e-6) turns into advantages of 0.1 and more where there is nothing to learn."""
    ids: dict[object, int] = {}
    task = torch.tensor([ids.setdefault(label, len(ids)) for label in index], dtype=torch.long, device=rewards.device)
    exact = rewards.double()
    count = exact.new_zeros(len(ids)).index_add_(0, task, torch.ones_like(exact))
    mean = exact.new_zeros(len(ids)).index_add_(0, task, exact) / count
    # two passes, as torch.std: the squares of the differences from the mean, not the mean square less the squared mean
    squares = exact.new_zeros(len(ids)).index_add_(0, task, (exact - mean[task]).square())
    std = (squares / (count - 1).clamp(min=1)).sqrt()
    alone = count == 1
    return mean.masked_fill(alone, 0.0)[task].to(rewards.dtype), std.masked_fill(alone, 1.0)[task].to(rewards.dtype)
