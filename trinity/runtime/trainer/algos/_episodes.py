"""A batch's episodes and their steps, as the step-wise estimators read them (multi_step_grpo, gigpo).

An episode is the experiences of one task (group) that share an `episode` id, in batch order; an experience without
one is an episode of its own. Its steps are the model's turns in those experiences, in order. Each step knows the
context the model acted on, as a digest (GiGPO's anchor state: two steps from the same context are compared).
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
    # the part of the turn's token rewards that is not its own: the episode's reward that an experience of an
    # agent's episode repeats when it is not the episode's last (episodes.py gives every experience the reward)
    repeated: float = 0.0

    def reward(self, token_level_rewards: torch.Tensor) -> float:
        """The turn's own reward: its tokens' rewards (and KL penalties) less what it repeats."""
        return float(token_level_rewards[self.row, self.start : self.end].sum()) - self.repeated


@dataclass(frozen=True)
class Episode:
    """One episode of a task: its rows in batch order, and its steps."""

    group: str
    rows: list[int]
    steps: list[Step]


def of(exps: list[Experience]) -> list[Episode]:
    """The batch's episodes, in the order their first experience appears."""
    found: dict[tuple[str, str], list[int]] = {}
    for row, exp in enumerate(exps):
        found.setdefault((exp.group, exp.episode or f"\0row{row}"), []).append(row)
    return [Episode(group, rows, _steps(exps, rows)) for (group, _), rows in found.items()]


def _steps(exps: list[Experience], rows: list[int]) -> list[Step]:
    steps = []
    for row in rows:
        exp = exps[row]
        repeats = row != rows[-1] and exp.turn_rewards is None
        turns = exp.turns()
        for i, (start, end) in enumerate(turns):
            context = exp.prompt_ids + exp.response_ids[:start]
            repeated = exp.reward if repeats and i == len(turns) - 1 else 0.0
            steps.append(Step(row, start, end, _digest(context), repeated))
    return steps


def _digest(ids: list[int]) -> bytes:
    return hashlib.blake2b(np.asarray(ids, dtype=np.int64).tobytes(), digest_size=16).digest()


def by_group(episodes: list[Episode]) -> dict[str, list[Episode]]:
    """Task -> its episodes."""
    out: dict[str, list[Episode]] = {}
    for episode in episodes:
        out.setdefault(episode.group, []).append(episode)
    return out


def normalised(values: torch.Tensor, epsilon: float, std: bool = True) -> torch.Tensor:
    """(values - their mean) / (their std, or 1, + epsilon), as GRPO does; one value alone has mean 0 and std 1."""
    if len(values) == 1:
        return values / (1.0 + epsilon)
    spread = values.std() if std else torch.tensor(1.0)
    return (values - values.mean()) / (spread + epsilon)
