"""Each role's Ray `runtime_env`: the device decision, the profile name and the role's env vars."""

import os
from collections.abc import Mapping

from ..config.schema import RunConfig
from ..platforms import get_platform
from ..utils.device import DEVICE_ENV, HARDWARE_ENV

EXPORTED = "exported in the driver's environment"

# Which `env` block a role gets besides `common`; the other roles (explorer, buffer) get common only.
ROLE_ENV = {"trainer": "trainer", "rollout": "rollout", "explorer": None, "buffer": None}


def role_env(config: RunConfig, role: str, exported: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """name -> (value, origin) for one role; a variable already exported in the driver wins and says so."""
    if role not in ROLE_ENV:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLE_ENV)}")
    exported = os.environ if exported is None else exported
    block = ROLE_ENV[role]
    values = {name: (value, "env.common") for name, value in config.env.common.items()}
    if block:
        values.update({name: (value, f"env.{block}") for name, value in getattr(config.env, block).items()})
    for name in values:
        if name in exported and exported[name] != values[name][0]:
            values[name] = (exported[name], EXPORTED)
    # verl's platform is ours to choose: its detection answers "cpu" in an actor Ray hid devices from
    if role == "trainer":
        for name, value in get_platform(config.hardware.device_type).verl_env().items():
            values[name] = (value, f"platform {config.hardware.device_type}")
    values[DEVICE_ENV] = (config.hardware.device_type, f"hardware {config.hardware.name}")
    values[HARDWARE_ENV] = (config.hardware.name, f"hardware {config.hardware.name}")
    return values


def runtime_env(config: RunConfig, role: str, exported: Mapping[str, str] | None = None) -> dict:
    """The `runtime_env` to pass to `.options(runtime_env=...)` for an actor of `role`."""
    return {"env_vars": {name: value for name, (value, _) in role_env(config, role, exported).items()}}
