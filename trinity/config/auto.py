"""`hardware=auto`: the profile whose `detect:` rule recognises this machine."""

import re
from pathlib import Path

from ..errors import ConfigError, Issue
from ..platforms.detect import Detection, Probes, detect
from .profiles import LoadedProfile, available, load_profile

AUTO = "auto"
# A size a device name states, e.g. 'NVIDIA A100-SXM4-40GB', 'NVIDIA A100 80GB PCIe', 'NVIDIA H100 80GB HBM3'.
NAMED_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*GB(?![a-z])", re.IGNORECASE)


def auto_profile(dirs: tuple[Path, ...], probes: Probes, source: str = "") -> tuple[str, str]:
    """(profile name, how it was chosen) for this machine; an error when no profile recognises it."""
    return choose_profile(detect(probes), dirs, source)


def choose_profile(found: Detection, dirs: tuple[Path, ...], source: str = "") -> tuple[str, str]:
    """(profile name, how it was chosen) for what detection found. The device memory is the measured one, else the
    size the device names state (a name saying 40GB is never taken for an 80 GB device); a rule's memory bounds
    decide between profiles whose names match."""
    memory, how = found.memory_gb, f"auto: {found.summary()}"
    if memory is None and (memory := named_memory(found.names)) is not None:
        how += f"; {memory:g} GB from the device name"
    candidates = [load_profile(name, dirs) for name in available(dirs)]
    matches = [
        p for p in candidates if p.profile.facts.device_type == found.device_type and _recognises(p, found, memory)
    ]
    if not matches:
        raise _no_match(found, candidates, source)
    best = min(matches, key=lambda p: _preference(p, dirs))
    return best.name, how


def named_memory(names: tuple[str, ...]) -> float | None:
    """The largest device memory in GB that the names state ('NVIDIA A100-SXM4-40GB' -> 40), None if none does."""
    sizes = [float(m.group(1)) for name in names for m in NAMED_MEMORY.finditer(name)]
    return max(sizes) if sizes else None


def _preference(loaded: LoadedProfile, dirs: tuple[Path, ...]) -> tuple:
    # Your own profile folders before the shipped one; then the rule with more memory bounds (the narrower one:
    # a100_40g before a100, ascend910b4 before ascend910b).
    folder = loaded.chain[0].parent
    rank = next((i for i, d in enumerate(dirs) if Path(d).resolve() == folder.resolve()), len(dirs))
    rule = loaded.profile.detect
    return rank, -((rule.min_memory_gb is not None) + (rule.max_memory_gb is not None)), loaded.name


def _recognises(loaded: LoadedProfile, found: Detection, memory: float | None) -> bool:
    rule = loaded.profile.detect
    if not found.names:
        return not rule.names  # a machine without accelerators is the profile that names none
    squeezed = [name.replace(" ", "") for name in found.names]
    named = any(re.search(pattern, name) for pattern in rule.names for name in (*found.names, *squeezed))
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
