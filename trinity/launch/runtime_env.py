"""Each role's Ray `runtime_env`: the device decision, the profile name and the role's env vars."""

import os
from collections.abc import Mapping

from ..config.schema import RunConfig
from ..platforms import get_platform
from ..utils.device import DEVICE_ENV, HARDWARE_ENV
from .roles import EXPLORER, role

EXPORTED = "exported in the driver's environment"


def role_env(config: RunConfig, name: str, exported: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """variable -> (value, origin) for role `name`; a variable already exported in the driver wins and says so."""
    entry = role(name)
    exported = os.environ if exported is None else exported
    block = entry.env
    values = {var: (value, "env.common") for var, value in config.env.common.items()}
    if block:
        values.update({var: (value, f"env.{block}") for var, value in getattr(config.env, block).items()})
    for var in values:
        if var in exported and exported[var] != values[var][0]:
            values[var] = (exported[var], EXPORTED)
    # verl's platform is ours to choose: its detection answers "cpu" in an actor Ray hid devices from
    if entry.verl_platform:
        for var, value in get_platform(config.hardware.device_type).verl_env().items():
            values[var] = (value, f"platform {config.hardware.device_type}")
    # an external (API) model: the explorer asks it, with the URL and key the driver's environment holds (never the
    # config: it names the variables only); a variable the driver lacks stays unset (preflight refuses the URL's)
    for var in external_vars(config, name):
        if exported.get(var):
            values[var] = (exported[var], EXPORTED)
    values[DEVICE_ENV] = (config.hardware.device_type, f"hardware {config.hardware.name}")
    values[HARDWARE_ENV] = (config.hardware.name, f"hardware {config.hardware.name}")
    return values


def external_vars(config: RunConfig, name: str) -> tuple[str, ...]:
    """(the base URL's variable, the API key's variable) of the external model role `name` asks: the explorer's,
    where the run has one; () otherwise."""
    external = config.model.external_model
    return (external.base_url_env, external.api_key_env) if name == EXPLORER and external.enable else ()


def secret_vars(config: RunConfig, name: str) -> tuple[str, ...]:
    """Variables of role `name` that hold a credential whatever they are called (masked where the plan is shown)."""
    return external_vars(config, name)[1:]


def runtime_env(config: RunConfig, role: str, exported: Mapping[str, str] | None = None) -> dict:
    """The `runtime_env` to pass to `.options(runtime_env=...)` for an actor of `role`."""
    return {"env_vars": {name: value for name, (value, _) in role_env(config, role, exported).items()}}
