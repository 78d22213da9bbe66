"""Explore without a trainer in this run (mode explore); with checkpoint sync, the engines take the weights a
`train` run of the same directory publishes, every synchronizer.explorer_sync_interval explore steps. A dead engine or
explorer is replaced (driver/replace.py, as in a stage that trains), the engines then take the newest published
weights, and the explore step or evaluation that failed runs again: nothing of a failed step reached the buffer, and
the buffer stores each explore step once."""

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ....launch.roles import ROLLOUT
from .. import replace, step_results
from ..published_weights import take_published
from ..watcher import RoleFailed

if TYPE_CHECKING:
    from ..health import EngineHealth
    from ..stage import Stage


def run(stage: "Stage") -> None:
    explored = stage.start.done
    version = stage.start.offset + explored  # the weights the engines hold
    health = replace.watch_health(stage)

    def again(started: int, call: Callable[[], Any]) -> Any:
        """`call` (with explore step `started` the last one started), run again after each replacement of a dead
        engine or explorer it failed on."""
        nonlocal version
        while True:
            try:
                return call()
            except RoleFailed as failed:
                version = _recover(stage, failed, health, (started, explored), version)

    try:
        if stage.config.explorer.eval_on_startup:
            again(explored, lambda: step_results.evaluate(stage, version))
        while explored < stage.total:
            if explored % stage.config.synchronizer.explorer_sync_interval == 0:
                version = take_published(stage, version)
            step = explored + 1
            result = again(step, lambda s=step: stage.wait([stage.explorer.explore_step.remote(s)])[0])
            explored += 1
            step_results.explored(stage, explored, result)
        version = take_published(stage, version)
        again(explored, lambda: step_results.evaluate(stage, version))
    finally:
        replace.unwatch_health(stage)


def _recover(
    stage: "Stage", failed: RoleFailed, health: "EngineHealth | None", steps: tuple[int, int], version: int
) -> int:
    """Replace the dead engine(s) or explorer of `failed` (re-raised where replace.py refuses, or the budget is spent),
    `steps`: the last explore step started and the steps done; a new engine loads the stage's weights, so every engine
    then takes the newest published ones. Returns the version the engines hold."""
    names = replace.dead_roles(stage, failed)
    if not names:
        replace.say_why_not(stage, failed)
        raise failed
    started = time.monotonic()
    restarts = replace.grant(stage, names, failed, steps[0])
    if health is not None:
        health.pause()  # until the new actors are set up: starting, they may be slow to answer
    replace.replace_or_raise(stage, names, restarts, failed, steps[1])
    loaded = None
    if any(replace.role_of(stage, name) == ROLLOUT for name in names):
        version = take_published(stage, stage.start.offset + stage.start.done)
        loaded = f"the engines hold weights v{version}"
    replace.recorded(stage, restarts, time.monotonic() - started, loaded)
    if health is not None:
        health.resume()
    return version
