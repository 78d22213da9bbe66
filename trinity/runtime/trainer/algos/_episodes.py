"""A batch's episodes and their steps, as the step-wise estimators (multi_step_grpo, gigpo) and dynamic sampling read
them.

An episode is the experiences of one task (group) that share an `episode` id, in batch order; an experience without
one is an episode of its own. Its steps are the model's turns in those experiences, in order. An experience's reward
is its own part of the episode's where it rewards its turns one by one (`turn_rewards`), or where it is the episode's
last; otherwise it repeats the episode's reward (an agent's broken chain, rollout/episodes.py) and counts nothing. Each
step knows the context the model acted on, as a digest (GiGPO's anchor state: steps from one context are compared).
"""

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from ...experience import Experience


@dataclass(frozen=True)
class Step:
    """One turn: its row in the batch, its tokens [start, end) in the response, and the context it acted on."""

    row: int
    start: int
    end: int
    state: bytes
    repeated: float = 0.0  # the part of the turn's token rewards that repeats the episode's reward: not its own

    def reward(self, token_level_rewards: torch.Tensor) -> float:
        """The turn's own reward: its tokens' rewards (and KL penalties) less what it repeats."""
        return float(token_level_rewards[self.row, self.start : self.end].sum()) - self.repeated


@dataclass(frozen=True)
class Episode:
    """One episode of a task: its rows in batch order, and its steps."""

    group: str
    rows: list[int]
    steps: list[Step]

    def reward(self, token_level_rewards: torch.Tensor) -> float:
        """Its return: the sum of its steps' own rewards."""
        return sum(step.reward(token_level_rewards) for step in self.steps)


def rows_by_episode(exps: list[Experience]) -> dict[tuple[str, str], list[int]]:
    """(group, episode) -> the rows of its experiences, in batch order; an experience without an id is its own."""
    found: dict[tuple[str, str], list[int]] = {}
    for row, exp in enumerate(exps):
        found.setdefault((exp.group, exp.episode or f"\0row{row}"), []).append(row)
    return found


def repeats(exp: Experience, last: bool) -> bool:
    """Whether the experience's reward repeats its episode's rather than being a part of it."""
    return not last and exp.turn_rewards is None


def episode_reward(exps: list[Experience]) -> float:
    """The reward of an episode's experiences (in order): the sum of their own parts."""
    return sum(e.reward for i, e in enumerate(exps) if not repeats(e, i == len(exps) - 1))


def of(exps: list[Experience]) -> list[Episode]:
    """The batch's episodes, in the order their first experience appears."""
    return [Episode(group, rows, _steps(exps, rows)) for (group, _), rows in rows_by_episode(exps).items()]


def _steps(exps: list[Experience], rows: list[int]) -> list[Step]:
    steps = []
    for row in rows:
        exp = exps[row]
        turns = exp.turns()
        repeated = exp.reward if repeats(exp, row == rows[-1]) else 0.0
        for i, ((start, end), state) in enumerate(zip(turns, _states(exp, turns))):
            steps.append(Step(row, start, end, state, repeated if i == len(turns) - 1 else 0.0))
    return steps


def _states(exp: Experience, turns: list[tuple[int, int]]) -> list[bytes]:
    """A digest of the context before each turn (the prompt and the response up to the turn), hashed as it grows."""
    digest, done, out = hashlib.blake2b(_bytes(exp.prompt_ids), digest_size=16), 0, []
    for start, _ in turns:
        digest.update(_bytes(exp.response_ids[done:start]))
        out.append(digest.copy().digest())
        done = start
    return out


def _bytes(ids: list[int]) -> bytes:
    return np.asarray(ids, dtype=np.int64).tobytes()


def by_group(episodes: list[Episode]) -> dict[str, list[Episode]]:
    """Task -> its episodes."""
    out: dict[str, list[Episode]] = {}
    for episode in episodes:
        out.setdefault(episode.group, []).append(episode)
    return out


def normalised(values: torch.Tensor, epsilon: float, divisor: float | torch.Tensor | None = None) -> torch.Tensor:
    """(values - their mean) / (divisor + epsilon), as GRPO does; the divisor is their std unless given. One value
    alone has mean 0 and std 1. In float64, as grpo's statistics (_groups.row_mean_std): equal values give 0."""
    alone, exact = len(values) == 1, values.double()
    if divisor is None:
        divisor = 1.0 if alone else exact.std()
    return ((exact - (0.0 if alone else exact.mean())) / (divisor + epsilon)).to(values.dtype)
