"""Step-wise GRPO (Trinity-RFT's `multi_step_grpo`, after rLLM): each episode's reward is normalised within its task's
episodes, as GRPO normalises rollouts, and that one advantage is given to every step of the episode, in whichever of
its experiences the step is."""

import torch

from ..functions import register_advantage
from . import _episodes


@register_advantage("step_wise_grpo")
def step_wise_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    episodes: list[_episodes.Episode],
    epsilon: float = 1e-6,
    enable_step_norm: bool = False,
    std_cal_level: str = "group",
):
    """advantage = (the episode's reward - the task's mean) / (the task's std, or the batch's, + epsilon) on every
    token of the episode's turns, divided by its number of turns with enable_step_norm. The episode's reward is its
    last experience's (its turns' own where they are rewarded one by one: _episodes.py), less its KL penalty; a task
    of one episode has mean 0 (and, at std_cal_level group, std 1)."""
    with torch.no_grad():
        final = {id(e): torch.tensor(e.reward(token_level_rewards)) for e in episodes}
        spread = None
        if std_cal_level == "batch":
            rewards = torch.stack(list(final.values()))
            spread = rewards.std() if len(rewards) > 1 else torch.tensor(1.0)
        out = torch.zeros_like(token_level_rewards)
        for group in _episodes.by_group(episodes).values():
            rewards = torch.stack([final[id(e)] for e in group]).float()
            for episode, score in zip(group, _episodes.normalised(rewards, epsilon, spread)):
                share = score / len(episode.steps) if enable_step_norm and episode.steps else score
                out[episode.rows] = share
        out = out * response_mask
        return out, out.clone()
