"""Which runtime class each planned actor runs, found by its `ActorSpec.role`, and its keyword arguments.

The launcher adds the arguments every role takes (name, role, visible_devices_env).
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.algorithms.queries import needs_rollout
from ..config.schema import RunConfig
from ..launch.plan import ActorSpec

Make = Callable[[ActorSpec], tuple[type, dict[str, Any]]]


def role_factory(config: RunConfig, run_dir: Path) -> Make:
    """A `make(spec)` for Launch.start_actors: every role of `config`'s plan, constructed lightly."""
    logs = str(run_dir / "logs")
    builders: dict[str, Callable[[ActorSpec], tuple[type, dict[str, Any]]]] = {
        "trainer": lambda spec: _trainer(config, spec),
        "rollout": lambda spec: _engine(config, spec),
        "explorer": lambda spec: _explorer(config),
        "buffer": lambda spec: _buffer(config, run_dir),
    }

    def make(spec: ActorSpec) -> tuple[type, dict[str, Any]]:
        if spec.role not in builders:
            raise ValueError(f"no runtime class for role {spec.role!r} (roles: {', '.join(builders)})")
        cls, kwargs = builders[spec.role](spec)
        return cls, {"log_dir": logs, **kwargs}

    return make


def _trainer(config: RunConfig, spec: ActorSpec) -> tuple[type, dict[str, Any]]:
    from .trainer.rank import TrainerRank

    return TrainerRank, {"config": config, "rank": spec.rank, "world_size": config.cluster.trainer_gpu_num or 0}


def _engine(config: RunConfig, spec: ActorSpec) -> tuple[type, dict[str, Any]]:
    from .rollout import engine_class

    return engine_class(config.explorer.rollout_model.engine_type), {"config": config, "index": spec.rank}


def _explorer(config: RunConfig) -> tuple[type, dict[str, Any]]:
    from .explorer import Explorer

    return Explorer, {"config": config}


def _buffer(config: RunConfig, run_dir: Path) -> tuple[type, dict[str, Any]]:
    from ..config.schema.buffer import StorageConfig
    from .buffer.actor import ExperienceBuffer

    storage = config.buffer.trainer_input.experience_buffer or StorageConfig(name="experiences", storage_type="queue")
    data_set = not needs_rollout(config.algorithm.algorithm_type)  # as the stage's buffer setup decides
    return ExperienceBuffer, {"storage": storage, "run_dir": str(run_dir), "data_set": data_set}
