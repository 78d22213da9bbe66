"""When the explorer may run ahead and when weights are synchronised (Trinity-RFT's semantics).

Train step t learns from the experiences of explore step t; version v is the weights after train
step v (0: the model the stage started from).

- `fixed`: a sync follows every `sync_interval`-th train step, and explore step s waits for the
  weights of step interval * floor((s - 1 - offset) / interval): with interval 1 and offset 0 the
  explorer alternates with the trainer (strictly on-policy); with offset 1 it runs one step ahead,
  so exploring and training overlap.
- `trainer_driven`: the trainer pushes weights every `sync_interval` steps; the explorer never
  waits for a given version, it takes each one at its next step boundary.
- `explorer_driven`: every `sync_interval` explore steps the explorer takes whatever the trainer
  has; the trainer never waits.
In the two driven styles the explorer stays within `sync_offset + sync_interval` steps of the
trainer, so the buffer and the staleness of experiences stay bounded.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class SyncPolicy:
    style: str
    interval: int
    offset: int

    def version_needed(self, step: int) -> int:
        """Under `fixed`, the weights explore step `step` waits for."""
        return self.interval * max(0, (step - 1 - self.offset) // self.interval)

    def may_explore(self, step: int, engine_version: int, trained: int) -> bool:
        """Whether explore step `step` may start now."""
        if self.style == "fixed":
            return engine_version >= self.version_needed(step)
        return step - 1 - trained <= self.offset + self.interval

    def sync_due(self, trained: int, engine_version: int, explored: int, last_asked: int) -> bool:
        """Whether to move the trainer's weights to the engines now (`last_asked`: explore step of the last driven
        sync)."""
        if trained <= engine_version:
            return False
        if self.style == "explorer_driven":
            return explored % self.interval == 0 and explored > last_asked
        return trained % self.interval == 0
