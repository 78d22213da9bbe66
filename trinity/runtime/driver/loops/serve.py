"""Answer agents outside the run on the engines' OpenAI endpoints and the proxy in front of them (mode serve), until
buffer.total_steps steps of buffer.batch_size rewarded experiences (none: until stopped): /feedback's experiences (the
proxy's and the engines') are stored a step at a time, and the weights a `train` run of the same directory publishes
are taken between polls (through the proxy, min_running_model_num engines answering meanwhile)."""

import time
from typing import TYPE_CHECKING

from ...explorer.results import batch_metrics
from .. import step_results
from ..published_weights import take_published

if TYPE_CHECKING:
    from ..stage import Stage

POLL_S = 0.5  # how often the stage takes the engines' rewarded experiences and published weights
# an ExploreResult's counts of the explorer's own step: outside agents made these experiences, no explorer ran
NO_EXPLORE_STEP = {"tasks": 0, "engine_calls": 0, "steps_in_flight": 0, "tasks_left_behind": 0}


def run(stage: "Stage") -> None:
    served, version, pending = stage.start.done, stage.start.offset + stage.start.done, []
    size, started = stage.config.buffer.batch_size, time.perf_counter()
    try:
        while not stage.total or served < stage.total:
            version = take_published(stage, version)
            pending += _rewarded(stage, final=False)
            while len(pending) >= size and (not stage.total or served < stage.total):
                served, step, pending = served + 1, pending[:size], pending[size:]
                _store(stage, step, served)
                result = batch_metrics(step, time.perf_counter() - started) | NO_EXPLORE_STEP
                step_results.explored(stage, served, result)
                started = time.perf_counter()
            time.sleep(POLL_S)
    finally:  # rewards already acknowledged are stored, also when the run is stopped
        _store(stage, pending + _rewarded(stage, final=True), served + 1)


def _rewarded(stage: "Stage", final: bool) -> list:
    """The newly rewarded experiences of the proxy and the engines; `final`: /feedback takes no more after these."""
    proxied = stage.proxy.take_experiences(final) if stage.proxy is not None else []
    return proxied + [
        e for taken in stage.wait([e.take_experiences.remote(final) for e in stage.engines]) for e in taken
    ]


def _store(stage: "Stage", experiences: list, step: int) -> None:
    """Store experiences in the buffer as explore step `step`'s."""
    for exp in experiences:
        exp.step = step
    if experiences:
        stage.wait([stage.buffer.put.remote(experiences)])
