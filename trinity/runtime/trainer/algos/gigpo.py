"""GiGPO (group-in-group policy optimisation, Feng et al. 2025, arXiv:2505.10978; Trinity-RFT's `gigpo`): an episode
advantage (its return against the other episodes of its task) plus omega times a step advantage (the step's
discounted return against the other steps taken from the same context, its anchor state, anywhere in the batch).

A step's reward is its turn's own (the workflow's turn_rewards, else the episode's reward on its last turn); its
anchor is the token context the model acted on, so steps that saw the same conversation are compared.
"""

import torch

from ..functions import register_advantage
from . import _episodes


def returns(rewards: list[float], gamma: float) -> list[float]:
    """R_t = sum over k >= t of gamma^(k - t) r_k."""
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


@register_advantage("gigpo")
def gigpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    episodes: list[_episodes.Episode],
    omega: float = 1.0,
    gamma: float = 1.0,
    fnorm: str = "none",
    epsilon: float = 1e-6,
):
    """On each turn's tokens: A_E + omega * A_S. A_E: the episode's return (its rewards' sum) normalised within its
    task; A_S: the step's discounted return normalised within its anchor group (0 for an anchor of one step).
    fnorm 'std' divides by the group's std, 'none' by 1 (epsilon added to either)."""
    with torch.no_grad():
        divisor = None if fnorm == "std" else 1.0
        episode_score: dict[int, float] = {}
        anchors: dict[bytes, list[tuple[_episodes.Step, float]]] = {}
        for group in _episodes.by_group(episodes).values():
            rewards = [[s.reward(token_level_rewards) for s in e.steps] for e in group]
            totals = torch.tensor([sum(r) for r in rewards], dtype=torch.float32)
            for episode, score in zip(group, _episodes.normalised(totals, epsilon, divisor).tolist()):
                episode_score[id(episode)] = score
            for episode, steps_rewards in zip(group, rewards):
                for step, value in zip(episode.steps, returns(steps_rewards, gamma)):
                    anchors.setdefault(step.state, []).append((step, value))
        step_score: dict[int, float] = {}
        for members in anchors.values():
            if len(members) > 1:
                values = torch.tensor([v for _, v in members], dtype=torch.float32)
                for (step, _), score in zip(members, _episodes.normalised(values, epsilon, divisor).tolist()):
                    step_score[id(step)] = score
        out = torch.zeros_like(token_level_rewards)
        for episode in episodes:
            for step in episode.steps:
                step_advantage = step_score.get(id(step), 0.0)
                out[step.row, step.start : step.end] = episode_score[id(episode)] + omega * step_advantage
        out = out * response_mask
        return out, out.clone()
