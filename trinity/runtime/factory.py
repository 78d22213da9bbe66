"""Which runtime class each planned actor runs, and with what arguments (the launcher adds name, role, visible-devices
variable)."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..launch.plan import ActorSpec


def role_factory(config: Any, run_dir: Path) -> Callable[[ActorSpec], tuple[type, tuple]]:
    """A `make(spec)` for Launch.start_actors: every role of `config`'s plan, constructed lightly."""
    logs = str(run_dir / "logs")
    trainers = config.cluster.trainer_gpu_num or 0

    def make(spec: ActorSpec) -> tuple[type, tuple]:
        if spec.role == "trainer":
            from .trainer.rank import TrainerRank

            return TrainerRank, (logs, config, spec.rank, trainers)
        if spec.role == "rollout":
            from .rollout import engine_class

            return engine_class(config.explorer.rollout_model.engine_type), (logs, config, spec.rank)
        if spec.role == "explorer":
            from .explorer import Explorer

            return Explorer, (logs, config)
        if spec.role == "synchronizer":
            from .sync.synchronizer import Synchronizer

            return Synchronizer, (logs, config, str(run_dir))
        if spec.role == "buffer":
            from ..config.schema.buffer import StorageConfig
            from .buffer.actor import ExperienceBuffer

            storage = config.buffer.trainer_input.experience_buffer or StorageConfig(
                name="experiences", storage_type="queue"
            )
            return ExperienceBuffer, (logs, storage, str(run_dir))
        raise ValueError(f"no runtime class for role {spec.role!r}")

    return make
