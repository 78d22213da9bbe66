"""Weights between runs of one directory: a `train` run publishes its trainer's weights every sync interval; an
`explore` or `serve` run's engines take each newer version at a step boundary (sync method `checkpoint`)."""

import time
from typing import TYPE_CHECKING

from ...config import sync_methods
from ..sync import files

if TYPE_CHECKING:
    from .stage import Stage


def publish(stage: "Stage", version: int) -> None:
    """Write the trainer's weights where an `explore` run of this project/name picks them up."""
    path = files.published_file(stage.run_dir.root)
    path.parent.mkdir(parents=True, exist_ok=True)
    stage.wait([r.write_weights.remote(str(path), version) for r in stage.ranks])


def take_published(stage: "Stage", version: int) -> int:
    """Load the published weights into the engines when they are newer than `version`; returns the version held."""
    published = files.published_version(stage.run_dir.root)
    if published is None or published <= version:
        return version
    path = str(files.published_file(stage.run_dir.root))
    started = time.perf_counter()

    def load(engines: list[int]) -> None:
        stage.wait([e.load_weights.remote(path, published) for e in (stage.engines[i] for i in engines)])

    proxy = getattr(stage, "proxy", None)
    if proxy is None:
        load(list(range(len(stage.engines))))
    else:
        _through_proxy(stage, proxy, load, published)
    seconds = time.perf_counter() - started
    method = sync_methods.CHECKPOINT
    stage.metrics.write("synchronizer", published, stage.name, method=method, seconds=seconds, weight_version=published)
    return published


def _through_proxy(stage: "Stage", proxy, load, version: int) -> None:
    """Serve mode's proxy keeps explorer.min_running_model_num engines answering while the others, taken out of turn
    and done with their requests (at most explorer.max_timeout s), load the weights, a wave at a time. With no engine
    to spare, they all load where they are (each between its requests), as without a proxy."""
    pending = list(range(len(stage.engine_actors)))
    while pending:
        wave = proxy.withdraw(pending)
        if not wave:
            load([a for e in pending for a in stage.engine_actors[e]])
            proxy.restore(pending, version)
            return
        try:
            if not proxy.drained(wave, stage.config.explorer.max_timeout):  # they load between their requests
                stage.progress.note(
                    f"engines {wave} still had requests after explorer.max_timeout "
                    f"({stage.config.explorer.max_timeout:g} s): weight version {version} loads beside them"
                )
            load([a for e in wave for a in stage.engine_actors[e]])
        finally:
            proxy.restore(wave, version)
        pending = [e for e in pending if e not in wave]
