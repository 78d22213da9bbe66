"""Hardware profiles: find them in the profile folders, apply `extends`, validate."""

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import ConfigError, Issue, did_you_mean
from ..paths import profile_files
from ..platforms import SHARED_FACTS, get_platform
from .merge import deep_merge
from .schema import HardwareProfile
from .sources.yaml_file import Mark, YamlDoc, load_yaml, locate
from .validate import validate


@dataclass(frozen=True)
class LoadedProfile:
    """A validated profile and the file position of each of its keys (after `extends`)."""

    profile: HardwareProfile
    chain: tuple[Path, ...]  # the profile's own file first, then what it extends
    positions: dict[tuple, Mark]

    def where(self, key_path: tuple) -> str:
        """`file:line:col` of a profile key (from whichever file in the chain set it)."""
        return locate(self.positions, key_path, self.chain[0])

    @property
    def name(self) -> str:
        return self.profile.name


def available(dirs: tuple[Path, ...]) -> dict[str, Path]:
    """Profile name -> file; a folder earlier in `dirs` shadows a later one."""
    found: dict[str, Path] = {}
    for folder in reversed(dirs):
        found.update(profile_files(folder))
    return dict(sorted(found.items()))


def load_profile(name: str, dirs: tuple[Path, ...], source: str = "") -> LoadedProfile:
    """The named profile with `extends` applied, validated; unknown names list the available ones."""
    names = available(dirs)
    if name not in names:
        raise unknown_profile(name, list(names), source)
    return _load(name, dirs, stamp(names))


def unknown_profile(name: str, names: list[str], source: str = "") -> ConfigError:
    """The error for a profile name that no folder has."""
    hint = did_you_mean(name, names) or "add a folder of your own profiles with --profile-dir or $TRINITY_PROFILE_PATH"
    return ConfigError(
        [
            Issue(
                f"unknown hardware profile '{name}'", key="hardware", source=source, allowed=", ".join(names), hint=hint
            )
        ]
    )


def stamp(files: dict[str, Path]) -> tuple:
    """A cache key that changes when a profile file is added, removed or edited."""
    return tuple((str(p), p.stat().st_mtime_ns) for p in files.values())


@lru_cache(maxsize=64)
def _load(name: str, dirs: tuple[Path, ...], _stamp: tuple) -> LoadedProfile:
    files = available(dirs)
    docs = _chain(name, files)
    data: dict[str, Any] = {}
    positions: dict[tuple, Mark] = {}
    for doc in reversed(docs):  # base first, the named profile last
        data = deep_merge(data, doc.data)
        positions.update(doc.positions)
    data["name"], data["extends"] = name, docs[0].data.get("extends")
    profile = validate(HardwareProfile, data, lambda p: locate(positions, p, docs[0].path))
    loaded = LoadedProfile(profile, tuple(d.path for d in docs), positions)
    _check_platform(loaded)
    return loaded


def _check_platform(loaded: LoadedProfile) -> None:
    """Facts every device of a type shares must match that type's platform record."""
    facts = loaded.profile.facts
    platform = get_platform(facts.device_type)
    issues = [
        Issue(
            f"{getattr(facts, name)!r} contradicts device_type {facts.device_type!r}, whose platform uses "
            f"{getattr(platform, name)!r}",
            key=f"facts.{name}",
            source=loaded.where(("facts", name)),
            allowed=repr(getattr(platform, name)),
            hint="fix the fact, or the device_type if that is what is wrong",
        )
        for name in SHARED_FACTS
        if getattr(facts, name) != getattr(platform, name)
    ]
    if issues:
        raise ConfigError(issues)


def _chain(name: str, files: dict[str, Path]) -> list[YamlDoc]:
    """The profile's document and those it extends, nearest first; cycles are errors."""
    docs: list[YamlDoc] = []
    seen: list[str] = []
    while name is not None:
        if name in seen:
            cycle = " -> ".join([*seen, name])
            raise ConfigError(
                [
                    Issue(
                        f"profiles extend each other in a cycle: {cycle}",
                        key="extends",
                        source=docs[-1].where(("extends",)),
                    )
                ]
            )
        if name not in files:
            raise unknown_profile(name, list(files), source=docs[-1].where(("extends",)))
        doc = load_yaml(files[name], what="hardware profile")
        _check_name(doc, name)
        seen.append(name)
        docs.append(doc)
        name = doc.data.get("extends")
    return docs


def _check_name(doc: YamlDoc, stem: str) -> None:
    written = doc.data.get("name", stem)
    if written != stem:
        raise ConfigError(
            [
                Issue(
                    f"profile is named '{written}' but its file is {stem}.yaml",
                    key="name",
                    source=doc.where(("name",)),
                    hint=f"rename one of them so both say '{stem}'",
                )
            ]
        )
