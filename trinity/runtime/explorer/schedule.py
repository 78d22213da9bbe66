"""Which rows each explore step reads, as Trinity-RFT's taskset scheduler (buffer/task_scheduler.py), written for
trinity: each training taskset's rows through its data selector (trinity/runtime/data/selectors.py).

One taskset: step s reads its selector's positions (s-1) x batch_size onward. Several: the step's batch_size slots
are dealt among them in proportion to their sizes, by a shuffled order of taskset ids per epoch (numpy's PCG64
seeded by the epoch, as upstream's `build_orders`); each taskset's slots are read through its selector at its own
position, the rows it has read so far. Every step is a function of the step alone, so a resumed run reads on where it
stopped; a selector that learns (difficulty_based) is given back the pass rates of the steps before (`replay`).

An evaluation taskset is read whole at each evaluation: batch_size rows at a time through a fresh selector, until as
many rows as it has are read (upstream's eval reader), so a random selector's may repeat and miss rows.
"""

import json
from collections import Counter
from pathlib import Path

import numpy as np

from ..data.selectors import Selector

Slot = tuple[int, int]  # (taskset index, row index)


class Schedule:
    """The training tasksets' reading: `batch(step)` names the rows of explore step `step` (1-based)."""

    def __init__(self, selectors: list[Selector], batch_size: int) -> None:
        self.selectors, self.batch_size = selectors, batch_size
        self.ids = [t for t, s in enumerate(selectors) for _ in range(s.size)]  # one per row: an epoch's slots
        self.orders: dict[int, list[int]] = {}

    @property
    def learns(self) -> bool:
        return any(s.learns for s in self.selectors)

    def batch(self, step: int) -> list[Slot]:
        """The (taskset, row) pairs step `step` reads, grouped by taskset in the order each first takes a slot."""
        start = (step - 1) * self.batch_size
        if len(self.selectors) == 1:
            return [(0, row) for row in self.selectors[0].pick(start, self.batch_size)]
        counts = Counter(self._taskset_at(p) for p in range(start, start + self.batch_size))
        return [(t, row) for t, n in counts.items() for row in self.selectors[t].pick(self._read_before(t, start), n)]

    def feedback(self, rates: dict[Slot, float]) -> None:
        """Pass rates of (taskset, row) pairs, to the selectors that learn."""
        for t, selector in enumerate(self.selectors):
            mine = sorted((row, rate) for (taskset, row), rate in rates.items() if taskset == t)
            selector.feedback([row for row, _ in mine], [rate for _, rate in mine])

    def _taskset_at(self, position: int) -> int:
        epoch, at = divmod(position, len(self.ids))
        return self._order(epoch)[at]

    def _read_before(self, taskset: int, position: int) -> int:
        """Rows taskset `taskset` read before global position `position`: its size each whole epoch, then its slots so
        far in this one."""
        epoch, at = divmod(position, len(self.ids))
        return epoch * self.selectors[taskset].size + self._order(epoch)[:at].count(taskset)

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self.orders:
            order = list(self.ids)
            np.random.default_rng(epoch).shuffle(order)
            self.orders = {epoch: order}
        return self.orders[epoch]


def eval_rows(selector: Selector, batch_size: int) -> list[int]:
    """The rows one evaluation reads: batch_size at a time from position 0, cut at the taskset's size."""
    out: list[int] = []
    for start in range(0, selector.size, batch_size):
        out += selector.pick(start, min(batch_size, selector.size))[: selector.size - start]
    return out


class FeedbackLog:
    """The pass rates fed back to the selectors, one line per explore step, so that a resumed run's selectors learn
    again what they had learnt by its checkpoint's step (and forget what later steps, explored again, taught)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def replay(self, schedule: Schedule, done: int) -> None:
        """Feed `schedule` the lines of steps 1 .. `done` in order; the later ones are dropped."""
        kept = []
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                entry = json.loads(line)
                if entry["step"] <= done:
                    schedule.feedback({(t, row): rate for t, row, rate in entry["rates"]})
                    kept.append(line + "\n")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(kept), encoding="utf-8")

    def add(self, step: int, rates: dict[Slot, float]) -> None:
        line = {"step": step, "rates": [[t, row, rate] for (t, row), rate in sorted(rates.items())]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
