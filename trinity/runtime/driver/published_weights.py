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
    stage.wait([e.load_weights.remote(path, published) for e in stage.engines])
    seconds = time.perf_counter() - started
    method = sync_methods.CHECKPOINT
    stage.metrics.write("synchronizer", published, stage.name, method=method, seconds=seconds, weight_version=published)
    return published
