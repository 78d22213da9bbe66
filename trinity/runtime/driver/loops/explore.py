"""Explore without a trainer in this run (mode explore); with checkpoint sync, the engines take the weights a
`train` run of the same directory publishes, every synchronizer.explorer_sync_interval explore steps."""

from typing import TYPE_CHECKING

from .. import step_results
from ..published_weights import take_published

if TYPE_CHECKING:
    from ..stage import Stage


def run(stage: "Stage") -> None:
    explored = stage.start.done
    version = stage.start.offset + explored
    if stage.config.explorer.eval_on_startup:
        step_results.evaluate(stage, version)
    while explored < stage.total:
        if explored % stage.config.synchronizer.explorer_sync_interval == 0:
            version = take_published(stage, version)
        result = stage.wait([stage.explorer.explore_step.remote(explored + 1)])[0]
        explored += 1
        step_results.explored(stage, explored, result)
    step_results.evaluate(stage, take_published(stage, version))
