"""When the explorer may run ahead and when weights are synchronised (Trinity-RFT's semantics).

Train step t learns from the experiences of explore step t; version v is the weights after train
step v (0: the model the stage started from). Trinity-RFT's trainer offers its weights every
`trainer_sync_interval` train steps and its explorer looks for new weights every
`explorer_sync_interval` explore steps once it is `sync_offset` steps in (its check points: explore
steps offset + k * explorer interval, k >= 1); both default to `sync_interval`
(trinity/config/derive/sync.py). A sync here is one event, with neither side in a step: the
trainer's weights as they are now reach the engines, so a trainer that offers waits until they
are taken.

- `fixed`: a sync follows every interval-th train step, and explore step s waits for the weights
  of step interval * floor((s - 1 - offset) / interval): with interval 1 and offset 0 the explorer
  alternates with the trainer (strictly on-policy); with offset 1 it runs one step ahead, so
  exploring and training overlap. The two intervals are one here (validate refuses them apart:
  the explorer waits at each check point for the next offer, which with a trainer interval above
  the explorer's never comes and below it lets the trainer fall further behind at every sync).
- `trainer_driven`: the trainer offers every trainer interval steps and waits; the explorer, which
  never waits for a version, takes the offer at its next check point.
- `explorer_driven`: at each check point the explorer asks and takes whatever the trainer has (at
  the end of the train step under way); the trainer never waits and its interval is not read.
- `fully_async` (Trinity-RFT's explorer/explorer.py FULLY_ASYNC): the explorer keeps up to
  `explorer.max_inflight_batches` explore steps running at once and never stops at a check point;
  the trainer offers every trainer interval steps and its weights reach the engines at once, while
  explore steps run (each generation call runs whole on one version: the engines take new weights
  between calls). Upstream bounds only the batches in flight; here explore step s also waits until
  s <= trained + sync_offset + max_inflight_batches, so its weights are at most that many steps
  old (one more trainer interval - 1 with a trainer interval above 1), unless steps write fewer
  experiences than a train step takes: then one more starts while the trainer's batch is short
  (the scheduler's `_short`), or the trainer would wait for a batch the bound keeps from being made.
In the two driven styles the explorer runs at most to the first check point at least
`sync_offset + explorer interval + 1` steps past the trainer (below offset + 2 x explorer interval
+ 1), so the buffer stays bounded and every check point can be reached while the trainer waits.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class SyncPolicy:
    style: str
    interval: int
    offset: int
    explorer_interval: int | None = None  # None: `interval` (synchronizer.explorer_sync_interval)
    trainer_interval: int | None = None  # None: `interval` (synchronizer.trainer_sync_interval)
    inflight: int = 1  # fully_async: explore steps running at once (explorer.max_inflight_batches)

    def __post_init__(self) -> None:
        for name in ("explorer_interval", "trainer_interval"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, self.interval)
        if self.style == "fixed" and self.explorer_interval != self.trainer_interval:
            raise ValueError(
                f"sync_style 'fixed' needs one interval, not explorer {self.explorer_interval} and trainer "
                f"{self.trainer_interval}"
            )

    @property
    def overlaps_syncs(self) -> bool:
        """Whether weights reach the engines while explore steps run (fully_async); else a sync runs between
        steps."""
        return self.style == "fully_async"

    def check_point(self, explored: int) -> bool:
        """Whether the explorer, `explored` steps in, looks for new weights before its next step."""
        return explored > self.offset and (explored - self.offset) % self.explorer_interval == 0

    def explore_limit(self, trained: int) -> int:
        """Driven styles: the last explore step that may run while the trainer has done `trained` steps (a check
        point, so that a trainer waiting with an offer is always reached); fully_async: `inflight` + offset past it."""
        if self.overlaps_syncs:
            return trained + self.offset + self.inflight
        least, every = trained + self.offset + self.explorer_interval + 1, self.explorer_interval
        return self.offset + -(-(least - self.offset) // every) * every

    def version_needed(self, step: int) -> int:
        """Under `fixed`, the weights explore step `step` waits for."""
        return self.trainer_interval * max(0, (step - 1 - self.offset) // self.explorer_interval)

    def may_explore(self, step: int, engine_version: int, trained: int) -> bool:
        """Whether explore step `step` may start now."""
        if self.style == "fixed":
            return engine_version >= self.version_needed(step)
        return step <= self.explore_limit(trained)

    def offers(self, trained: int, engine_version: int) -> bool:
        """Whether the trainer, `trained` steps in, holds an offer the engines have not taken (fixed and
        trainer_driven: it waits for the sync before its next step)."""
        return self.style != "explorer_driven" and trained > engine_version and trained % self.trainer_interval == 0

    def may_train(self, trained: int, engine_version: int, explorer_done: bool) -> bool:
        """Whether the next train step may start as far as syncs go (the data it needs aside): not while an offer
        waits to be taken, unless no explore step is left to take it."""
        return explorer_done or not self.offers(trained, engine_version)

    def sync_due(
        self, trained: int, engine_version: int, explored: int, last_asked: int, explorer_done: bool = False
    ) -> bool:
        """Whether to move the trainer's weights to the engines now (`last_asked`: explore step of the last sync;
        `explorer_done`: every explore step of the stage has run)."""
        if trained <= engine_version:
            return False
        if self.style == "fixed" or self.overlaps_syncs:  # fully_async: an offer is taken as it is made
            return trained % self.trainer_interval == 0
        if not self.check_point(explored) or (explorer_done and explored <= last_asked):
            return False  # a finished explorer takes once, at its last step if that is a check point
        if self.style == "explorer_driven":
            return explored > last_asked  # asks once at each check point
        return trained % self.trainer_interval == 0  # trainer_driven: an offer, taken at any check point it waits at
