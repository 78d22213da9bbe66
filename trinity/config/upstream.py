"""Trinity-RFT 0.6.0's config keys and their fate in trinity (`conf/upstream_fields.yaml`).

A key our schema does not have is reported as unknown only when Trinity-RFT does not know it either:
a key upstream has is refused as "not supported by trinity yet", or as one upstream fills itself, and
a key trinity dropped names its replacement. The table is read only when such a key turns up.
"""

from dataclasses import dataclass
from functools import cache

import yaml

from ..errors import Issue
from ..paths import data_dir

FATES = ("supported", "not yet", "internal")
NOT_YET = "known Trinity-RFT key, not supported by trinity yet"
NOT_YET_VALUE = "known Trinity-RFT value, not supported by trinity yet"
INTERNAL = "known Trinity-RFT key that Trinity-RFT fills itself; not a setting"
REMOVED = "no longer a key: Trinity-RFT 0.6 dropped it, and so did trinity"


@dataclass(frozen=True)
class Fate:
    """What trinity does with one upstream key (or section)."""

    key: str
    fate: str  # one of FATES, or 'removed' for a key trinity dropped
    why: str = ""
    use: str = ""


@cache
def table() -> dict[str, Fate]:
    """Every entry of conf/upstream_fields.yaml by its dotted key, removed keys included."""
    with open(data_dir("conf") / "upstream_fields.yaml", encoding="utf-8") as stream:
        data = yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    entries = {key: _fate(key, value) for key, value in data["fields"].items()}
    entries.update({key: Fate(key, "removed", use=value["use"]) for key, value in data["removed"].items()})
    return entries


def _fate(key: str, value) -> Fate:
    if isinstance(value, str):
        return Fate(key, value)
    return Fate(key, value["fate"], value.get("why", ""), value.get("use", ""))


# sections that map names of the user's choosing to sections, as `{}` in the table's keys
MAPPINGS = ("buffer.trainer_input.auxiliary_buffers",)


def pattern(path: tuple) -> str:
    """('buffer', 'explorer_input', 'tasksets', 0, 'name') -> 'buffer.explorer_input.tasksets[].name'; a name in a
    mapping (MAPPINGS) becomes `{}`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += "[]"
        elif out in MAPPINGS:
            out += "{}"
        else:
            out += f".{part}" if out else str(part)
    return out


def fate_of(path: tuple) -> Fate | None:
    """The entry for a key: its own, its nearest enclosing section's, or (for a section) the one its keys share."""
    key, entries = pattern(path), table()
    for end in range(len(path), 0, -1):
        found = entries.get(pattern(path[:end]))
        if found is not None:
            return found
    inside = {entries[k].fate for k in entries if k.startswith((key + ".", key + "[]", key + "{}"))}
    return Fate(key, inside.pop()) if len(inside) == 1 else None


@cache
def values() -> dict[str, dict[str, str]]:
    """Values of supported keys that Trinity-RFT takes and trinity does not: {dotted key: {value: why}}."""
    with open(data_dir("conf") / "upstream_fields.yaml", encoding="utf-8") as stream:
        return yaml.safe_load(stream).get("values") or {}


def refusal(path: tuple, key: str, source: str, value: object = None) -> Issue | None:
    """The error for a key our schema lacks when Trinity-RFT knows it (or trinity once had it), or, given the
    `value` our schema refused, for a value Trinity-RFT takes; None otherwise."""
    if value is not None:
        why = values().get(pattern(path), {}).get(str(value))
        return Issue(f"{NOT_YET_VALUE}: {value!r}", key=key, source=source, hint=why) if why else None
    found = fate_of(path)
    if found is None or found.fate == "supported":
        return None
    if found.fate == "not yet":
        return Issue(NOT_YET, key=key, source=source, hint=found.why or "remove it")
    if found.fate == "internal":
        return Issue(INTERNAL, key=key, source=source, hint=f"remove it; {found.use}" if found.use else "remove it")
    return Issue(REMOVED, key=key, source=source, hint=f"use {found.use}")
