"""REC (Trinity-RFT's `rec`): a group-mean baseline, optionally std-normalised and balanced by dropping surplus
below-mean rollouts, and a REINFORCE loss on the current log-probs with a choice of ratio masks (clip_mode),
token weights (weight) and regularisers."""

import random

import numpy as np
import torch

from ..functions import own_loss, register_advantage
from . import _groups


def _kept(rewards: torch.Tensor, drop: str | None, seed: str) -> torch.Tensor:
    """Which rollouts of one group count: with drop 'balance', random below-mean ones are left out until they are
    no more than the rest (seeded by the task, so a rerun drops the same ones)."""
    keep = torch.ones(len(rewards), dtype=torch.bool)
    below = (rewards < rewards.mean()).nonzero(as_tuple=True)[0].tolist()
    surplus = len(below) - (len(rewards) - len(below))
    if drop == "balance" and surplus > 0:
        keep[random.Random(seed).sample(below, surplus)] = False
    return keep


@register_advantage("rec")
def rec_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    std_normalize: bool = False,
    drop: str | None = None,
    **_: object,
):
    """advantage = reward - mean (/ (std + epsilon)) over the group's kept rollouts; 0 for a dropped one. A group
    with one kept rollout or fewer has mean 0 and std 1."""
    with torch.no_grad():
        rewards = _groups.scores(token_level_rewards).float()
        out = torch.zeros_like(rewards)
        for task, rows in _groups.groups(index).items():
            group = rewards[rows]
            keep = _kept(group, drop, str(task)) if len(rows) > 1 else torch.ones(1, dtype=torch.bool)
            mean, std = (group[keep].mean(), group[keep].std(unbiased=False)) if keep.sum() > 1 else (0.0, 1.0)
            centred = group - mean
            out[rows] = torch.where(keep, centred / (std + epsilon) if std_normalize else centred, 0.0)
        return _groups.on_tokens(out, response_mask)


def in_range(ratio, seq_ratio, advantages, mode, low, high, low_prime, high_prime) -> torch.Tensor:
    """The tokens clip_mode keeps, by the (not differentiated) token ratio, or the sequence's for gspo-one-side."""
    up, down = advantages >= 0, advantages <= 0
    if mode == "two-side":
        return (ratio >= 1 - low) & (ratio <= 1 + high)
    if mode == "one-side":
        return ((ratio <= 1 + high) & up) | ((ratio >= 1 - low) & down)
    if mode == "gspo-one-side":
        return ((seq_ratio <= 1 + high) & up) | ((seq_ratio >= 1 - low) & down)
    if mode == "ring":
        inside = (ratio >= 1 - low) & (ratio <= 1 + high)
        return inside | (up & (ratio <= 1 - low_prime)) | (down & (ratio >= 1 + high_prime))
    return torch.ones_like(ratio, dtype=torch.bool)


def weighted(advantages, ratio, seq_ratio, weight: str, temp: float) -> torch.Tensor:
    """The advantage with its token weight: the ratio, the sequence's ratio, exp(A / temp), or none."""
    if weight == "importance_sampling":
        return advantages * ratio
    if weight == "gspo_importance_sampling":
        return advantages * seq_ratio
    if weight == "advantage":
        return advantages * torch.exp(advantages / temp)
    return advantages


@own_loss("rec")
def rec_loss(
    log_prob,
    old_log_prob,
    advantages,
    response_mask,
    agg,
    *,
    epsilon_low=0.2,
    epsilon_high=0.2,
    epsilon_low_prime=0.6,
    epsilon_high_prime=2.0,
    clip_mode="none",
    weight="none",
    regularizer="none",
    regularizer_coef=0.0,
    temp=1.0,
    **_,
):
    """agg(-w(A) * log pi * kept + regulariser); gspo-one-side aggregates per sequence (seq-mean-token-mean)."""
    mask = response_mask.float()
    log_ratio = (log_prob - old_log_prob).detach()
    ratio = torch.exp(log_ratio)
    seq_ratio = torch.exp((log_ratio * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1))
    kept = in_range(
        ratio, seq_ratio, advantages, clip_mode, epsilon_low, epsilon_high, epsilon_low_prime, epsilon_high_prime
    )
    losses = -weighted(advantages, ratio, seq_ratio, weight, temp) * log_prob * kept.float()
    if regularizer == "forward-kl":
        losses = losses - regularizer_coef * log_prob
    elif regularizer == "k2":
        losses = losses + regularizer_coef * (log_prob - old_log_prob).square()
    loss = agg(losses, "seq-mean-token-mean" if clip_mode == "gspo-one-side" else None)
    clipped = float(((~kept).float() * mask).sum() / mask.sum().clamp(min=1))
    return loss, {"actor/pg_clipfrac": clipped}
