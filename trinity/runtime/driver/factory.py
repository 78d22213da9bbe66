"""Which runtime class each planned actor runs (its role's entry in launch/roles.py) and its keyword arguments (the
class's own `plan_arguments`).

The launcher adds the arguments every role takes (name, role, visible_devices_env).
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...config.schema import RunConfig
from ...launch.plan import ActorSpec, auxiliary_slot
from ...launch.roles import AUXILIARY, role
from ...utils.imports import import_path
from ..records.run_dir import RunDir
from ..roles.base import Role
from ..rollout import engine_class

Make = Callable[[ActorSpec], tuple[type, dict[str, Any]]]


def role_factory(config: RunConfig, run_dir: Path) -> Make:
    """A `make(spec)` for Launch.start_actors: every role of `config`'s plan in `run_dir`, constructed lightly, logging
    to the run's logs folder (RunDir.logs) at log.level, by node with log.group_by_node."""
    folder = RunDir(run_dir, config.log.save_dir).logs
    logs = {"log_dir": str(folder), "log_level": config.log.level, "log_by_node": config.log.group_by_node}

    def make(spec: ActorSpec) -> tuple[type, dict[str, Any]]:
        cls = role_class(config, spec.role, spec)
        return cls, logs | cls.plan_arguments(config, spec, run_dir)

    return make


def role_class(config: RunConfig, name: str, spec: ActorSpec | None = None) -> type[Role]:
    """The runtime class of role `name` in `config`'s run (the rollout role's is its engine's; an auxiliary engine's,
    its model's engine's: `spec` says which, the first auxiliary model's without one)."""
    entry = role(name)
    if name == AUXILIARY:
        index, _ = auxiliary_slot(config, spec.rank if spec else 0)
        return engine_class(config.explorer.auxiliary_models[index].engine_type)
    if entry.runtime_class is None:
        return engine_class(config.explorer.rollout_model.engine_type)
    return import_path(entry.runtime_class, f"the runtime class of role {name!r}")
