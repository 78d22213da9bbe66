"""`${hw:KEY}` and `${hw.verl_env:}`: what trinity derives for a hardware profile, as OmegaConf resolvers.

Inside a `hardware/<profile>` option the profile is implied; anywhere else name it:
`${hw:trainer.device,ascend910b}`. The work happens in `_facts` (pydantic, never torch), imported on first use.
"""

from contextvars import ContextVar
from typing import Any

from omegaconf import DictConfig, OmegaConf

_PROFILE: ContextVar[str | None] = ContextVar("trinity_hardware_profile", default=None)


def register() -> None:
    """Register the resolvers; replacing is harmless (Hydra's plugin scan may run this module twice)."""
    OmegaConf.register_new_resolver("hw", hardware_value, replace=True)
    OmegaConf.register_new_resolver("hw.verl_env", verl_env, replace=True)


def hardware_value(key: str, profile: str | None = None) -> Any:
    """KEY of the run config trinity resolves for the profile; null where only trinity's schema default set it."""
    from . import _facts

    return _facts.hardware_value(_profile(profile, f"${{hw:{key},ascend910b}}"), key)


def verl_env(profile: str | None = None) -> dict:
    """verl's Ray runtime env vars for the profile: what every role shares, and the verl platform."""
    from . import _facts

    return _facts.verl_env(_profile(profile, "${hw.verl_env:ascend910b}"))


def mapping(template: str, profile: str) -> DictConfig:
    """The template (YAML text) with its resolvers evaluated for `profile`; keys that come out null are left out."""
    from . import _facts

    _facts.check(profile)
    token = _PROFILE.set(profile)
    try:
        data = OmegaConf.to_container(OmegaConf.create(template), resolve=True)
    finally:
        _PROFILE.reset(token)
    return OmegaConf.create(_without_nulls(data))


def _profile(named: str | None, example: str) -> str:
    profile = named or _PROFILE.get()
    if not profile:
        raise ValueError(
            f"outside a hardware/<profile> option, name the hardware profile as the last argument, e.g. {example}"
        )
    return profile


def _without_nulls(tree: Any) -> Any:
    # A null here means "the profile says nothing": leave the key out so the app keeps its own value.
    if isinstance(tree, dict):
        return {k: _without_nulls(v) for k, v in tree.items() if v is not None}
    return tree
