"""How trainer rank 0 assembles each step's batch, as the algorithm's sample strategy and GRPO's dynamic sampling
say: an explore step's rollouts from the buffer, none made by weights more than max_staleness steps older than the
trainer's (staleness_control); the groups whose rewards all agree dropped (std_threshold: they teach GRPO nothing)
and, with duplicate_experiences, the batch refilled with copies of the groups kept (POLARIS's refill; Trinity-RFT
instead waits for later explore steps, which a step-locked run cannot); then ceil(expert_data_ratio x
train_batch_size) samples of the SFT data set (mix)."""

import random
import statistics
from dataclasses import replace
from math import ceil
from typing import TYPE_CHECKING

from ...config.algorithms.sampling import SAMPLE_STRATEGIES, batch_split
from ...config.modes import trains_until_drained
from ...config.schema import RunConfig
from ..experience import Experience
from .algos import _episodes

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from ..buffer.stores import DataSet


def expert_data(config: RunConfig, tokenizer: str) -> "DataSet | None":
    """The SFT data set sample strategy mix puts in each batch (None without one), tokenised by `tokenizer`."""
    args = config.algorithm.sample_strategy_args or {}
    if not SAMPLE_STRATEGIES[config.algorithm.sample_strategy].mixes:
        return None
    from ..buffer.actor import data_set

    storage = config.buffer.trainer_input.auxiliary_buffers[args["sft_dataset_name"]]
    return data_set(storage, {"tokenizer": tokenizer, "model": config.model, "data": "sft"})


class Drained(Exception):
    """The experiences ran out where the run trains until they do (modes.trains_until_drained): its normal end."""


class Sampler:
    """Rank 0's batches: `expert` is the SFT data set of sample strategy mix (None without one)."""

    def __init__(self, config: RunConfig, buffer: "ActorHandle", expert: "DataSet | None" = None) -> None:
        algorithm = config.algorithm
        self.config, self.buffer, self.expert = config, buffer, expert
        self.strategy = SAMPLE_STRATEGIES[algorithm.sample_strategy]
        self.args = algorithm.sample_strategy_args or {}
        advantage = algorithm.advantage_fn_args or {}
        self.threshold, self.refill = advantage.get("std_threshold"), advantage.get("duplicate_experiences", False)
        self.until_drained = trains_until_drained(config)

    def sizes(self) -> tuple[int, int]:
        """Rollouts and SFT samples per train batch."""
        return batch_split(self.config)

    def min_version(self, step: int) -> int:
        """The oldest weights train step `step` takes experiences of (0: any)."""
        limit = self.args.get("max_staleness") if self.strategy.drops_stale else None
        return 0 if limit is None else max(0, ceil(step - 1 - limit))

    def batch(self, step: int) -> tuple[list[Experience], dict]:
        """Train step `step`'s experiences and what sampling dropped or added."""
        import ray

        rollouts, samples = self.sizes()
        timeout = self.config.buffer.trainer_input.experiences.max_read_timeout  # Trinity-RFT's QueueReader's wait
        exps = ray.get(self.buffer.get.remote(rollouts, step, timeout, self.min_version(step), self.until_drained))
        if exps is None:
            raise Drained(f"no experiences for {timeout:g} s (max_read_timeout) before train step {step}")
        metrics: dict[str, float] = {}
        if self.strategy.drops_stale:
            metrics["stale_dropped"] = ray.get(self.buffer.dropped.remote())
        if self.threshold is not None:
            exps, metrics["filtered_groups"] = informative(exps, self.threshold, self.refill, random.Random(step))
        if samples:
            exps += [replace(e, expert=True) for e in self.expert.take(samples, step)]
            metrics["mixed_samples"] = samples
        return exps, metrics


def informative(
    exps: list[Experience], threshold: float, refill: bool, rng: random.Random
) -> tuple[list[Experience], int]:
    """The rollouts of the groups whose reward std over their episodes (unbiased; a group of one episode has none) is
    above `threshold`, and how many groups were dropped; with `refill`, as many copies of kept groups (drawn at random,
    each copy a group of its own with the same advantages) as were dropped. An episode of several experiences (one
    `episode` id) counts once, with its reward (algos/_episodes.py)."""
    groups: dict[str, list[Experience]] = {}
    for exp in exps:
        groups.setdefault(exp.group, []).append(exp)
    kept = [g for g in groups.values() if _informs(g, threshold)]
    dropped = len(groups) - len(kept)
    out = [e for g in kept for e in g]
    if refill and kept and dropped:
        copies = rng.choices(kept, k=dropped)
        out += [replace(e, group=f"{e.group}#copy{i}") for i, group in enumerate(copies) for e in group]
    return out, dropped


def _informs(group: list[Experience], threshold: float) -> bool:
    """Whether the rewards of a group's episodes spread above `threshold` (one episode has no spread)."""
    rewards = [_episodes.episode_reward([group[r] for r in rows]) for rows in _episodes.rows_by_episode(group).values()]
    return len(rewards) > 1 and statistics.stdev(rewards) > threshold
