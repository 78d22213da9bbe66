"""The replay buffer: the experience queue served by priority (buffer.trainer_input.experience_buffer.replay_buffer), as
Trinity-RFT's AsyncPriorityQueue (buffer/storage/queue.py).

An item is one task's experiences from one put (its group), with the model version that made them (its first
experience's) and how often it was served. Its priority comes from the priority function (config/replay.py):
linear_decay is version - decay x uses, so the freshest weights' experiences come first and a served item loses
priority. The highest priority is served first (the oldest item among equals); a full queue (`capacity` items) evicts
its lowest (the oldest among equals) for a new item of at least that priority, else drops the new one. A served item
is queued again after `reuse_cooldown_time` seconds (None: never), if its priority function says so. A batch takes
whole items into a pool and serves experiences from it in order, so a batch ends between two of an item's
experiences; the rest waits for the next batch. Items and pooled experiences older than the trainer's oldest
accepted version (sample strategy staleness control) are dropped.
"""

import bisect
import heapq
import itertools
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...config.replay import PRIORITY_FUNCTIONS
from ...utils.imports import import_path
from ..experience import Experience
from .scope import NOTHING, Resumed

Priority = Callable[[int, int, dict[str, Any], random.Random], tuple[float, bool]]


def linear_decay(version: int, uses: int, args: dict[str, Any], rng: random.Random) -> tuple[float, bool]:
    """version - decay x uses; always queued again."""
    return float(version - args["decay"] * uses), True


def decay_limit_randomization(version: int, uses: int, args: dict[str, Any], rng: random.Random) -> tuple[float, bool]:
    """version - decay x uses, plus Gaussian noise of `sigma`; queued while used fewer than use_count_limit times."""
    noise = rng.gauss(0.0, args["sigma"]) if args["sigma"] > 0 else 0.0
    limit = args["use_count_limit"]
    return float(version - args["decay"] * uses + noise), limit <= 0 or uses < limit


@dataclass(eq=False)
class Item:
    """One task's experiences from one put, as the queue holds them."""

    experiences: list[Experience]
    uses: int = 0

    @property
    def version(self) -> int:
        return self.experiences[0].weight_version


class ReplayQueue:
    """The experience buffer's store (stores.py's interface: add, take, drop_stale, rewind) served by priority."""

    def __init__(
        self,
        capacity: int,
        priority_fn: str = "linear_decay",
        args: dict[str, Any] | None = None,
        cooldown_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
    ):
        self.capacity, self.cooldown_s, self.clock = capacity, cooldown_s, clock
        self.priority: Priority = import_path(PRIORITY_FUNCTIONS[priority_fn].runtime, f"priority_fn {priority_fn!r}")
        self.args, self.rng = args if args is not None else {"decay": 2.0}, random.Random(seed)
        self.levels: dict[float, deque[Item]] = {}  # priority -> its items, oldest first
        self.order: list[float] = []  # the priorities held, ascending
        self.pool: deque[Experience] = deque()  # experiences of served items that no batch took yet
        self.cooling: list[tuple[float, int, Item]] = []  # (when it is queued again, tie-break, item), a heap
        self._ties = itertools.count()

    def __len__(self) -> int:
        """Items queued (not the pool's, nor those cooling down)."""
        return sum(len(items) for items in self.levels.values())

    def add(self, experiences: list[Experience], step: int | None = None) -> None:
        """Queue each task's experiences (one item per group, in order of first appearance), after the served items
        whose cooldown has passed (upstream queues them again at that moment)."""
        self._requeue()
        groups: dict[str, list[Experience]] = {}
        for exp in experiences:
            groups.setdefault(exp.group, []).append(exp)
        for group in groups.values():
            self._queue(Item(group))

    def take(self, n: int, step: int) -> list[Experience]:
        """`n` experiences, the highest priority first; [] (nothing taken) while fewer are there."""
        self._requeue()
        if len(self.pool) + sum(len(i.experiences) for items in self.levels.values() for i in items) < n:
            return []
        while len(self.pool) < n:
            self._serve(self._pop(-1))
        return [self.pool.popleft() for _ in range(n)]

    def drop_stale(self, min_version: int, step: int) -> int:
        """Drop what weights older than `min_version` made, queued or pooled; returns how many experiences."""
        self._requeue()
        dropped = sum(1 for e in self.pool if e.weight_version < min_version)
        self.pool = deque(e for e in self.pool if e.weight_version >= min_version)
        for priority in list(self.order):
            kept = deque(i for i in self.levels[priority] if i.version >= min_version)
            dropped += sum(len(i.experiences) for i in self.levels[priority] if i.version < min_version)
            self._set_level(priority, kept)
        return dropped

    def rewind(self, after_step: int | None, resumed: bool = True) -> Resumed:
        return NOTHING  # priorities and uses live in memory: a restarted trainer starts an empty queue

    def _queue(self, item: Item) -> None:
        """Insert by priority; a full queue evicts its lowest for an item of at least that priority."""
        priority, queued = self.priority(item.version, item.uses, self.args, self.rng)
        if not queued:
            return
        if len(self) >= self.capacity:
            if self.order[0] > priority:
                return  # lower than everything held: dropped
            self._pop(0)
        if priority not in self.levels:
            bisect.insort(self.order, priority)
            self.levels[priority] = deque()
        self.levels[priority].append(item)

    def _pop(self, end: int) -> Item:
        """The oldest item of the highest (end -1) or the lowest (end 0) priority, taken out."""
        priority = self.order[end]
        item = self.levels[priority].popleft()
        self._set_level(priority, self.levels[priority])
        return item

    def _set_level(self, priority: float, items: deque) -> None:
        if items:
            self.levels[priority] = items
        else:
            del self.levels[priority]
            self.order.remove(priority)

    def _serve(self, item: Item) -> None:
        self.pool.extend(item.experiences)
        item.uses += 1
        if self.cooldown_s is not None:
            heapq.heappush(self.cooling, (self.clock() + self.cooldown_s, next(self._ties), item))

    def _requeue(self) -> None:
        """Queue again the served items whose cooldown has passed."""
        now = self.clock()
        while self.cooling and self.cooling[0][0] <= now:
            self._queue(heapq.heappop(self.cooling)[2])

    @classmethod
    def of(cls, storage: Any, seed: int = 0) -> "ReplayQueue":
        """The replay queue an experience buffer's config asks for."""
        replay = storage.replay_buffer
        return cls(storage.capacity, replay.priority_fn, replay.priority_fn_args, replay.reuse_cooldown_time, seed=seed)
