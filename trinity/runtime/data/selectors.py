"""Data selectors (`data_selector`, config/selectors.py): which rows of a data set its reads take, as Trinity-RFT's
(buffer/selector/selector.py, difficulty_estimator.py), written for trinity.

A data set's reading is numbered by position: the rows read so far, across epochs. `pick(position, count)` names
the rows read at positions position .. position + count - 1. What it names depends on the position, the rows and
the seed alone, so a run resumed at a step reads on where it stopped; difficulty_based also learns from the pass rates
fed back (`feedback`), which the explorer replays on resume (trinity/runtime/explorer/schedule.py).
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...config.schema.buffer import DataSelectorConfig
from ...config.selectors import SELECTORS, DifficultyKwargs
from ...utils.imports import import_path


class Selector:
    """Reads the rows in order (sequential); subclasses choose otherwise."""

    learns = False  # whether feedback changes what it picks

    def __init__(self, rows: Sequence[dict], config: DataSelectorConfig) -> None:
        if not rows:
            raise ValueError("a selector needs rows to choose from")
        self.size, self.seed = len(rows), config.seed

    def pick(self, position: int, count: int) -> list[int]:
        """The rows read at positions position .. position + count - 1."""
        return [p % self.size for p in range(position, position + count)]

    def feedback(self, indices: list[int], values: list[float]) -> None:
        """Pass rates observed on rows `indices`; only a selector that learns reads them."""


class Sequential(Selector):
    """The rows in order, epoch after epoch."""


class Shuffle(Selector):
    """Each epoch a permutation of the rows (numpy's PCG64 seeded by seed + epoch, as upstream's)."""

    def __init__(self, rows: Sequence[dict], config: DataSelectorConfig) -> None:
        super().__init__(rows, config)
        self.orders: dict[int, list[int]] = {}

    def pick(self, position: int, count: int) -> list[int]:
        return [self._order(p // self.size)[p % self.size] for p in range(position, position + count)]

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self.orders:
            self.orders = {epoch: np.random.default_rng(self.seed + epoch).permutation(self.size).tolist()}
        return self.orders[epoch]


class Random(Selector):
    """Each batch `count` distinct rows drawn uniformly, seeded by seed + position (rows repeat across batches)."""

    def pick(self, position: int, count: int) -> list[int]:
        _distinct(count, self.size, "random")
        return np.random.default_rng(self.seed + position).choice(self.size, count, replace=False).tolist()


class OfflineEasy2Hard(Selector):
    """The rows by their feature columns' values, highest (easiest) first (ties: the later row first), in order."""

    def __init__(self, rows: Sequence[dict], config: DataSelectorConfig) -> None:
        super().__init__(rows, config)
        features = feature_matrix(rows, config.feature_keys)
        self.order = sorted(range(self.size), key=lambda i: (*features[i], i), reverse=True)

    def pick(self, position: int, count: int) -> list[int]:
        return [self.order[p % self.size] for p in range(position, position + count)]


class DifficultyBased(Selector):
    """The rows whose estimated pass rate is nearest `target_reward`: the `count` best scored (tau 0), else a draw
    without replacement weighted by softmax(score / tau); the score is minus the distance."""

    learns = True

    def __init__(self, rows: Sequence[dict], config: DataSelectorConfig) -> None:
        super().__init__(rows, config)
        self.args = DifficultyKwargs(**config.kwargs)
        args = self.args
        self.estimate = PassRates(feature_matrix(rows, config.feature_keys), args.m, args.lamb, args.rho)
        self.estimate.adaptive_rho = args.adaptive_rho

    def pick(self, position: int, count: int) -> list[int]:
        _distinct(count, self.size, "difficulty_based")
        rng = np.random.default_rng(self.seed + position)
        rates = self.estimate.draw(rng) if self.args.do_sample else self.estimate.mean()
        scores = -np.abs(self.args.target_reward - rates)
        if self.args.tau == 0:
            return np.argsort(-scores, kind="stable")[:count].tolist()
        logits = scores / self.args.tau
        weights = np.exp(logits - logits.max())
        return rng.choice(self.size, count, replace=False, p=weights / weights.sum()).tolist()

    def feedback(self, indices: list[int], values: list[float]) -> None:
        if indices:
            self.estimate.update(indices, values)


class PassRates:
    """Each task's pass rate as a Beta(alpha, beta) (upstream's InterpolationBetaPREstimator): a batch's observed
    rates count as `m` rollouts each; every other task moves toward the rate its two features (a weaker and a
    stronger model's pass rates) predict at the policy's estimated capability, weighted by `rho`; `lamb` forgets."""

    DISCOUNT = 0.9  # how slowly the capability estimate moves

    def __init__(self, features: np.ndarray, m: int, lamb: float, rho: float) -> None:
        self.features, self.m, self.lamb, self.rho = features, m, lamb, rho
        self.alphas, self.betas = np.ones(len(features)), np.ones(len(features))
        self.capability: float | None = None
        self.adaptive_rho = False

    def mean(self) -> np.ndarray:
        return self.alphas / (self.alphas + self.betas)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        return rng.beta(self.alphas, self.betas)

    def update(self, indices: list[int], rates: list[float]) -> None:
        observed, weak, strong = np.asarray(rates, dtype=float), self.features[:, 0], self.features[:, 1]
        anchor = self.features[indices].mean(axis=0)
        found = (observed.mean() - anchor[0]) / (anchor[1] - anchor[0] + 1e-6)
        previous = self.capability
        self.capability = found if previous is None else self.DISCOUNT * previous + (1 - self.DISCOUNT) * found
        predicted = np.clip((strong - weak) * self.capability + weak, 0, 1)
        if self.adaptive_rho and np.mean(np.abs(predicted[indices] - observed)) >= 0.25:
            self.rho *= 0.5  # the features predict this policy badly: trust them less
        predicted[indices] = observed
        successes, failures = np.zeros(len(weak)), np.zeros(len(weak))
        successes[indices], failures[indices] = observed * self.m, (1 - observed) * self.m
        keep, rho, m = 1 - self.lamb, self.rho, self.m
        self.alphas = keep * self.alphas + self.lamb + (1 - rho) * successes + rho * predicted * m
        self.betas = keep * self.betas + self.lamb + (1 - rho) * failures + rho * (1 - predicted) * m


def build(rows: Sequence[dict], config: DataSelectorConfig) -> Selector:
    """The selector `config` names over `rows`."""
    entry = SELECTORS[config.selector_type]
    cls: Any = import_path(entry.runtime, f"data selector {entry.name!r}")
    return cls(rows, config)


def feature_matrix(rows: Sequence[dict], keys: list[str]) -> np.ndarray:
    """The rows' `keys` columns as numbers, one row per data set row."""
    out = np.empty((len(rows), len(keys)))
    for i, row in enumerate(rows):
        for j, key in enumerate(keys):
            if key not in row:
                raise ValueError(f"row {i} has no column {key!r} (data_selector.feature_keys)")
            try:
                out[i, j] = float(row[key])
            except (TypeError, ValueError):
                raise ValueError(f"row {i}: column {key!r} holds {row[key]!r}, not a number") from None
    return out


def _distinct(count: int, size: int, name: str) -> None:
    if count > size:
        raise ValueError(
            f"{name} draws {count} distinct rows a batch from {size}: the batch is larger than the data set"
        )
