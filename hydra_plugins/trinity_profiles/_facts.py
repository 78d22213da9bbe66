"""What trinity resolves for a profile, for the resolvers (pydantic, never torch, ray or verl).

The `_` keeps Hydra's plugin scan from importing this module when an app starts.
"""

import logging
from functools import lru_cache
from typing import Any

from hydra.errors import ConfigCompositionException

from trinity import paths
from trinity.config.compose import Request
from trinity.config.explain import explain
from trinity.config.merge import get_path
from trinity.config.profiles import available, stamp
from trinity.config.redact import redact
from trinity.config.resolve import ResolvedConfig, resolve
from trinity.errors import ConfigError, undotted
from trinity.launch.runtime_env import role_env
from trinity.platforms import get_platform

# verl's hybrid engine puts trainer and rollout on the same devices: trinity's mode `colocate`.
OVERRIDES = ("mode=colocate",)
ROLES = ("trainer", "rollout")
log = logging.getLogger("trinity.hydra")


def resolved(profile: str) -> ResolvedConfig:
    """`conf/minimal_run.yaml` resolved for the profile in mode colocate: `trinity config render` of the same."""
    dirs = paths.profile_dirs()
    return _resolve(profile, dirs, stamp(available(dirs)))


@lru_cache(maxsize=32)
def _resolve(profile: str, _dirs: tuple, _stamp: tuple) -> ResolvedConfig:
    # Keyed by the profile folders and their files: each resolver call asks again, and a profile may change.
    return resolve(
        Request(config=paths.data_dir("conf") / "minimal_run.yaml", overrides=(f"hardware={profile}", *OVERRIDES))
    )


def check(profile: str) -> None:
    """Resolve the profile now, so that a bad one fails with trinity's report rather than inside a resolver."""
    try:
        resolved(profile)
    except ConfigError as exc:
        raise ConfigCompositionException(f"hardware={profile}: {exc.report()}") from None


def hardware_value(profile: str, key: str) -> Any:
    """The value of KEY (a leaf or a section) for the profile, or None when only schema defaults set it."""
    config = resolved(profile)
    found = explain(config, [key], show_secrets=True)
    if all(step.layer == "schema" for explanation in found for step in explanation.steps):
        return None
    return get_path(config.config.model_dump(mode="json"), undotted(key))


def verl_env(profile: str) -> dict[str, str]:
    """verl's one Ray runtime env: the variables every role of the profile shares, and the verl platform to use."""
    config = resolved(profile).config
    platform = get_platform(config.hardware.device_type).verl_env()  # every verl process gets these, trainer or not
    envs = {
        role: {name: value for name, (value, _) in role_env(config, role).items() if name not in platform}
        for role in ROLES
    }
    shared = {name: value for name, value in envs["trainer"].items() if envs["rollout"].get(name) == value}
    _report_left_out(profile, {role: {n: v for n, v in env.items() if n not in shared} for role, env in envs.items()})
    return {**shared, **platform}


def _report_left_out(profile: str, left: dict[str, dict[str, str]]) -> None:
    # Every verl process (trainer worker, rollout server) inherits the job's env: a one-role variable has no place.
    parts = [
        f"{role} " + " ".join(f"{n}={v}" for n, v in sorted(redact(env).items())) for role, env in left.items() if env
    ]
    if parts:
        log.warning(
            "trinity: hardware=%s: verl starts every process with one Ray runtime env, so variables the profile sets "
            "for one role only are left out: %s (to give one to every process: "
            "+ray_kwargs.ray_init.runtime_env.env_vars.NAME='VALUE')",
            profile,
            "; ".join(parts),
        )
