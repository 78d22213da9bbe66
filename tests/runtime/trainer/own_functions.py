"""A stand-in for a module of trinity's own algorithm functions: importing it registers them with verl, under the
names of the entries keyed "own" (which the tests that import it add)."""

import torch

from trinity.runtime.trainer.functions import register_advantage, register_loss

KEY = "own"  # the key of its entries in ADVANTAGES and POLICY_LOSSES


@register_advantage(KEY)
def centred_reward(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, shift: float = 0.0, config=None):
    """The reward minus the batch's mean reward, plus `shift`, on every response token."""
    scores = token_level_rewards.sum(dim=-1)
    scores = (scores - scores.mean() + shift).unsqueeze(-1) * response_mask
    return scores, scores


@register_loss(KEY)
def mean_ratio(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None, **_):
    ratio = torch.exp(log_prob - old_log_prob)
    return -(ratio * advantages * response_mask).sum() / response_mask.sum(), {}
