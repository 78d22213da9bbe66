"""The config a run hands its roles: each key that named a hub repo now names the local folder of the commit the
driver fetched, so no role talks to a hub; and the record of what was fetched, for the run directory's config.yaml.

`explorer.rollout_model.model_path` keeps the name as written: it is the name the engines serve the model under on
their OpenAI endpoints (as upstream's engines do), and agents ask for it by that name.
"""

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ...errors import dotted
from .names import HubName, named_inputs

if TYPE_CHECKING:
    from ..resolve import ResolvedConfig
    from ..schema import RunConfig


@dataclass(frozen=True)
class Fetched:
    """A hub name as the driver fetched it: the commit its revision pointed to, and where its files are here."""

    name: HubName
    commit: str
    folder: Path
    source: str  # the endpoint it came from (credentials masked), or the cache when it was found offline


def localised(resolved: "ResolvedConfig", fetched: dict[HubName, Fetched]) -> "ResolvedConfig":
    """`resolved` with each fetched name replaced by its folder, in the root config and in every stage, and the
    record of what was fetched (`ResolvedConfig.fetched`, written into the run directory's config.yaml)."""
    stages = tuple((name, _local(config, fetched)) for name, config in resolved.stages)
    entries = tuple(record(resolved, fetched)) + resolved.fetched
    return replace(resolved, config=_local(resolved.config, fetched), stages=stages, fetched=entries)


def record(resolved: "ResolvedConfig", fetched: dict[HubName, Fetched]) -> list[dict[str, Any]]:
    """One entry per fetched name, with the keys that named it: what config.yaml records of the run's inputs."""
    keys: dict[HubName, list[str]] = {}
    for stage, config in resolved.runs:
        for item in named_inputs(config):
            label = dotted(item.key) + (f" (stage {stage})" if stage else "")
            keys.setdefault(item.name, []).append(label)
    return [
        {
            "name": f.name.text,
            "repo_type": f.name.repo_type,
            "revision": f.name.revision,
            "commit": f.commit,
            "source": f.source,
            "keys": list(dict.fromkeys(keys.get(name, []))),
        }
        for name, f in fetched.items()
        if name in keys
    ]


def _local(config: "RunConfig", fetched: dict[HubName, Fetched]) -> "RunConfig":
    for item in named_inputs(config):
        if item.name in fetched:
            config = _with(config, item.key, str(fetched[item.name].folder))
    return config


def _with(node: Any, key: tuple, value: str) -> Any:
    """A copy of `node` with the value at `key` (attribute names, list indices, mapping keys) replaced."""
    head, rest = key[0], key[1:]
    if isinstance(node, BaseModel):
        child = getattr(node, head)
        return node.model_copy(update={head: _with(child, rest, value) if rest else value})
    if isinstance(node, list):
        return [(_with(item, rest, value) if rest else value) if i == head else item for i, item in enumerate(node)]
    if isinstance(node, dict):
        return {k: (_with(item, rest, value) if rest else value) if k == head else item for k, item in node.items()}
    raise TypeError(f"no {head!r} in {type(node).__name__}")
