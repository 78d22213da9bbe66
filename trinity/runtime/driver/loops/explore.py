"""Explore without a trainer in this run (mode explore); with checkpoint sync, the engines take the weights a
`train` run of the same directory publishes, every synchronizer.explorer_sync_interval explore steps. A dead engine or
explorer is replaced (driver/replace.py, as in a stage that trains), every engine then takes the newest published
weights (a new one starts from the stage's), and the explore step, weight load or evaluation that failed runs again;
the buffer stores each explore step once (a step its explorer had stored before it died stores nothing again)."""

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
    start = version = stage.start.offset + explored  # the weights the engines hold
    health = replace.watch_health(stage)
    behind = False  # an engine was replaced: it holds the stage's weights, not the newest published

    def again(started: int, call: Callable[[], Any]) -> Any:
        """`call` (with explore step `started` the last one started), run again after each replacement of a dead
        engine or explorer it failed on; a replaced engine first takes the newest published weights."""
        nonlocal version, behind
        while True:
            try:
                if behind:
                    version, behind = take_published(stage, start), False
                return call()
            except RoleFailed as failed:
                behind |= _recover(stage, failed, health, (started, explored))

    def newest() -> int:
        return take_published(stage, version)

    try:
        if stage.config.explorer.eval_on_startup:
            again(explored, lambda: step_results.evaluate(stage, version))
        while explored < stage.total:
            if explored % stage.config.synchronizer.explorer_sync_interval == 0:
                version = again(explored, newest)
            step = explored + 1
            result = again(step, lambda s=step: stage.wait([stage.explorer.explore_step.remote(s)])[0])
            explored += 1
            step_results.explored(stage, explored, result)
        version = again(explored, newest)
        again(explored, lambda: step_results.evaluate(stage, version))
    finally:
        replace.unwatch_health(stage)


def _recover(stage: "Stage", failed: RoleFailed, health: "EngineHealth | None", steps: tuple[int, int]) -> bool:
    """Replace the dead engine(s) or explorer of `failed` (re-raised where replace.py refuses, or the budget is spent);
    `steps`: the last explore step started and the steps done. Returns whether an engine was replaced."""
    names = replace.dead_roles(stage, failed)
    if not names:
        replace.say_why_not(stage, failed)
        raise failed
    started = time.monotonic()
    restarts = replace.grant(stage, names, failed, steps[0])
    if health is not None:
        health.pause()  # until the new actors are set up: starting, they may be slow to answer
    replace.replace_or_raise(stage, names, restarts, failed, steps[1])
    engine = any(replace.role_of(stage, name) == ROLLOUT for name in names)
    replace.recorded(
        stage, restarts, time.monotonic() - started, "the engines take the newest weights" if engine else None
    )
    if health is not None:
        health.resume()
    return engine
