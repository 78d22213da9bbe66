"""Compose the layers of a run config, lowest first, recording where every value came from.

schema defaults -> conf/ base -> profile (recommended values, env) -> live cluster (run path)
-> user file -> CLI overrides (Hydra's override grammar)

Beside the tree, what the rules read of this node besides its profile: the driver release, where the profile's
platform maps device memory between processes only from one on (Ascend's HDK: platforms/ipc.py), read from the
driver's own files.
"""

import copy
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Optional

from .. import paths
from ..errors import ConfigError, Issue
from ..platforms import get_platform, ipc
from ..platforms.detect import Probes, detect
from .auto import AUTO, choose_profile
from .defaults import schema_defaults
from .merge import deep_merge, get_path, leaves
from .profiles import LoadedProfile, load_profile
from .provenance import Contribution, Provenance
from .sources.overrides import HARDWARE, Override, ParsedOverrides, parse_overrides
from .sources.yaml_file import YamlDoc, load_yaml

DEFAULT_HARDWARE = AUTO


RAY_AUTO = "auto"  # cluster.ray_address: a Ray running on this machine, else start one
RAY_HERE = (RAY_AUTO, "local")  # cluster.ray_address values whose Ray runs on this machine


def env_ray_address() -> str | None:
    """The address $RAY_ADDRESS names; None where it is unset, empty or 'auto' (ray.init reads it only then: the
    config's cluster.ray_address decides)."""
    value = os.environ.get("RAY_ADDRESS")
    return None if value in (None, "", RAY_AUTO) else value


@dataclass(frozen=True)
class Request:
    """What the user asked for: a run file, overrides, extra profile folders; and how to look at the machine."""

    config: Path | None = None
    overrides: tuple[str, ...] = ()
    profile_dirs: tuple[str, ...] = ()
    probes: Probes = field(default_factory=Probes)
    cluster: Optional["ClusterLayer"] = None  # what a live Ray cluster says, on the run path


@dataclass(frozen=True)
class ClusterLayer:
    """Values read from a live Ray cluster: above the profile, below the user's file. `gpu_per_node` is None where a
    person set it (the cluster then only says what its nodes offer)."""

    gpu_per_node: int | None
    node_devices: int
    source: str


@dataclass
class Composed:
    """The merged tree (interpolations not yet resolved), its provenance and the chosen profile."""

    tree: dict[str, Any]
    provenance: Provenance
    profile: LoadedProfile
    user: YamlDoc
    selection: str  # how the profile was chosen
    driver: dict[str, str | None] | None = None  # this node's driver release, where the platform's device IPC needs one


def compose(request: Request) -> Composed:
    """Merge every layer of `request` into one tree."""
    parsed = parse_overrides(request.overrides)
    user = load_yaml(request.config or paths.default_run_config(), what="run config")
    _reject_hardware_keys(user)
    dirs = paths.profile_dirs(request.profile_dirs)
    name, selection, detected = _choose(
        parsed.hardware or DEFAULT_HARDWARE, parsed.hardware_source, dirs, request.probes
    )
    profile = load_profile(name, dirs, parsed.hardware_source)
    provenance = Provenance()
    tree: dict[str, Any] = {}
    base = conf_base()
    for layer, data, where in (
        ("schema", schema_defaults(), lambda p: "schema default"),
        ("conf", base.data, base.where),
        ("profile", profile.profile.recommended, lambda p: profile.where(("recommended", *p))),
        ("profile", {"env": profile.profile.env.model_dump()}, profile.where),
        *_detected_layer(detected if _ray_here(user, parsed) else 0, selection),
        *_cluster_layer(request.cluster),
        ("file", user.data, user.where),
    ):
        tree = deep_merge(tree, data)
        provenance.record_tree(layer, data, where)
    for override in parsed.values:
        tree = apply_override(tree, override, provenance)
    driver = ipc.driver_release(get_platform(profile.profile.facts.device_type), request.probes)
    return Composed(tree, provenance, profile, user, selection, driver)


def _ray_here(user: YamlDoc, parsed: ParsedOverrides) -> bool:
    """Whether the run's Ray runs on this machine (no address named: cluster.ray_address auto or local, no
    $RAY_ADDRESS), so that what hardware=auto found here is what a node offers."""
    address = get_path(user.data, ("cluster", "ray_address"), None)
    for override in parsed.values:
        if override.path == ("cluster", "ray_address"):
            address = override.value
    return env_ray_address() is None and address in (None, *RAY_HERE)


def _detected_layer(devices: int, selection: str) -> tuple:
    """hardware=auto found this machine's accelerators: a node offers that many (the live cluster's layer, above it,
    says so for the cluster's nodes)."""
    if not devices:
        return ()
    return (("cluster", {"cluster": {"node_devices": devices}}, lambda p: selection),)


def _cluster_layer(cluster: ClusterLayer | None) -> tuple:
    if cluster is None:
        return ()
    values = {"node_devices": cluster.node_devices}
    if cluster.gpu_per_node is not None:
        values["gpu_per_node"] = cluster.gpu_per_node
    return (("cluster", {"cluster": values}, lambda p: cluster.source),)


def _choose(name: str, source: str, dirs: tuple[Path, ...], probes: Probes) -> tuple[str, str, int]:
    """(profile name, how it was chosen, accelerators detected here): named on the command line (nothing is detected),
    or detected."""
    if name == AUTO:
        found = detect(probes)
        return (*choose_profile(found, dirs, source), found.count)
    return name, f"hardware={name} on the command line", 0


@cache
def conf_base() -> YamlDoc:
    """The `conf/` base layer, read once per process."""
    return load_yaml(paths.data_dir("conf") / "config.yaml", what="base config")


def apply_override(tree: dict, override: Override, provenance: Provenance) -> dict:
    """A new tree with one override applied (`~key` deletes, anything else sets)."""
    if override.path[0] == HARDWARE:
        raise _hardware_key_error(".".join(override.path), override.source)
    before, tree = tree, copy.deepcopy(tree)
    parent, path = tree, []
    for part in override.path[:-1]:
        step = _step(parent, part, override)
        path.append(step)
        if not isinstance(_child(parent, step), (dict, list)):
            parent[step] = {}
        parent = parent[step]
    last = _step(parent, override.path[-1], override)
    full = (*path, last)
    if override.delete:
        _delete(parent, last, override)
        provenance.add(full, Contribution("override", override.source, None))
    else:
        old = _child(parent, last)
        merge = isinstance(old, dict) and isinstance(override.value, dict)
        parent[last] = deep_merge(old, override.value) if merge else override.value
        for sub_path, value in leaves(override.value):
            provenance.add(full + sub_path, Contribution("override", override.source, value))
        provenance.record_sections(_new_sections(before, full, override.value), override.source)
    return tree


def _new_sections(before: dict, full: tuple, value: Any) -> list[tuple]:
    """Sections the override brings into the tree (`nonexist` of `nonexist.key=3`): its problems are the override's."""
    inside = {leaf[:end] for leaf, _ in leaves(value, full) for end in range(1, len(leaf))}
    return [path for path in inside if not isinstance(get_path(before, path), (dict, list))]


def _step(parent: Any, part: str, override: Override) -> Any:
    # A numeric segment indexes a list: buffer.explorer_input.eval_tasksets.0.name=x
    if not isinstance(parent, list):
        return part
    if not part.isdigit() or int(part) >= len(parent):
        raise ConfigError(
            [
                Issue(
                    f"{part!r} is not an item of a list of {len(parent)}",
                    key=".".join(override.path),
                    source=override.source,
                    allowed=f"0..{len(parent) - 1}" if parent else "none: the list is empty",
                )
            ]
        )
    return int(part)


def _child(parent: Any, step: Any) -> Any:
    try:
        return parent[step]
    except (KeyError, IndexError, TypeError):
        return None


def _delete(parent: Any, last: Any, override: Override) -> None:
    try:
        del parent[last]
    except (KeyError, IndexError, TypeError):
        raise ConfigError(
            [Issue("cannot delete a key that is not set", key=".".join(override.path), source=override.source)]
        ) from None


def _reject_hardware_keys(user: YamlDoc) -> None:
    if HARDWARE in user.data:
        raise _hardware_key_error(HARDWARE, user.where((HARDWARE,)))


def _hardware_key_error(key: str, source: str) -> ConfigError:
    return ConfigError(
        [
            Issue(
                "hardware facts come from a hardware profile, not from the run config",
                key=key,
                source=source,
                hint="choose a profile with hardware=NAME; for a site variant write a profile with `extends: NAME`",
            )
        ]
    )
