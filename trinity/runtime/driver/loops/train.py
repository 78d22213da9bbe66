"""Train from the buffer without engines in this run (mode train): a data set for SFT and DPO; for RL, the
experiences an `explore` run of the same directory writes, to which it publishes its weights every
synchronizer.trainer_sync_interval train steps (sync method checkpoint). Given no step count, an RL train run trains
until a batch does not come within the experience buffer's max_read_timeout (modes.trains_until_drained)."""

from typing import TYPE_CHECKING

from ....config import sync_methods
from .. import step_results
from ..published_weights import publish

if TYPE_CHECKING:
    from ..stage import Stage


def run(stage: "Stage") -> None:
    trained = stage.start.done
    channel = sync_methods.method(stage.config.synchronizer.sync_method).channel
    publishes = stage.learns_from_rollout() and channel == sync_methods.FILES  # an explore run picks them up
    while not stage.total or trained < stage.total:  # 0: until the experiences stop coming
        results = stage.wait([r.train_step.remote(trained + 1) for r in stage.ranks])
        if "drained" in (results[0] or {}):
            stage.total = trained  # the stage's length, for its last checkpoint
            stage.progress.note(f"{results[0]['drained']}: the run ends after {trained} train steps")
            break
        trained += 1
        step_results.trained(stage, trained, results[0])
        if publishes and trained % stage.config.synchronizer.trainer_sync_interval == 0:
            publish(stage, stage.start.offset + trained)
