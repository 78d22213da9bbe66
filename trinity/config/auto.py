"""`hardware=auto`: the profile whose `detect:` rule recognises this machine."""

import re
from pathlib import Path

from ..errors import ConfigError, Issue
from ..platforms.detect import Detection, Probes, detect
from .profiles import LoadedProfile, available, load_profile

AUTO = "auto"


def auto_profile(dirs: tuple[Path, ...], probes: Probes, source: str = "") -> tuple[str, str]:
    """(profile name, how it was chosen) for this machine; an error when no profile recognises it."""
    found = detect(probes)
    candidates = [load_profile(name, dirs) for name in available(dirs)]
    matches = [p for p in candidates if p.profile.facts.device_type == found.device_type and _recognises(p, found)]
    if not matches:
        raise _no_match(found, candidates, source)
    best = min(matches, key=lambda p: _preference(p, dirs))
    return best.name, f"auto: {found.summary()}"


def _preference(loaded: LoadedProfile, dirs: tuple[Path, ...]) -> tuple:
    # Your own profile folders before the shipped one; then the rule with more memory bounds.
    folder = loaded.chain[0].parent
    rank = next((i for i, d in enumerate(dirs) if Path(d).resolve() == folder.resolve()), len(dirs))
    rule = loaded.profile.detect
    return rank, -((rule.min_memory_gb is not None) + (rule.max_memory_gb is not None)), loaded.name


def _recognises(loaded: LoadedProfile, found: Detection) -> bool:
    rule = loaded.profile.detect
    if not found.names:
        return not rule.names  # a machine without accelerators is the profile that names none
    squeezed = [name.replace(" ", "") for name in found.names]
    named = any(re.search(pattern, name) for pattern in rule.names for name in (*found.names, *squeezed))
    memory = found.memory_gb
    fits = memory is None or ((rule.min_memory_gb or 0) <= memory <= (rule.max_memory_gb or float("inf")))
    return named and fits


def _no_match(found: Detection, candidates: list[LoadedProfile], source: str) -> ConfigError:
    same = [
        f"{p.name} (names {p.profile.detect.names})"
        for p in candidates
        if p.profile.facts.device_type == found.device_type
    ]
    return ConfigError(
        [
            Issue(
                f"hardware=auto found {found.summary()}, and no profile recognises it",
                key="hardware",
                source=source,
                allowed=", ".join(same) or f"no profile has device_type {found.device_type!r}",
                hint="choose one with hardware=NAME, or write a profile whose detect.names matches this device",
            )
        ]
    )
