"""Command-line overrides in Hydra's grammar: `key=value`, `+key=value`, `++key=value`, `~key`."""

import re
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigError, Issue
from ..redact import mask_override

HARDWARE = "hardware"
GRAMMAR_HINT = "Hydra override grammar: key=value, +key=value, ~key; quote values with spaces"


@dataclass(frozen=True)
class Override:
    """One parsed override: the key path, its typed value, or a deletion."""

    text: str
    path: tuple[str, ...]
    value: Any = None
    delete: bool = False

    @property
    def source(self) -> str:
        return source_of(self.text)


@dataclass(frozen=True)
class ParsedOverrides:
    hardware: str | None
    hardware_source: str
    values: tuple[Override, ...]


def source_of(text: str) -> str:
    """How an override is named in messages and provenance (credential values masked)."""
    return f"override '{mask_override(text)}'"


# `hardware=NAME` is the override nearly every command is given: a plain name (one Hydra reads as that text) needs
# no grammar, whose parser costs more to set up than the rest of composing a config
_PLAIN_HARDWARE = re.compile(r"\+{0,2}hardware=([A-Za-z][A-Za-z0-9_]*)")
_NOT_NAMES = {"true", "false", "null", "nan", "inf"}


def plain_hardware(text: str) -> str | None:
    """The profile a plain `hardware=NAME` (`+`, `++`) names, or None where Hydra's grammar must read the override."""
    match = _PLAIN_HARDWARE.fullmatch(text)
    return match.group(1) if match and match.group(1).lower() not in _NOT_NAMES else None


def parse_overrides(texts: tuple[str, ...]) -> ParsedOverrides:
    """Split the hardware choice from value overrides; every malformed one is reported."""
    parser = None
    issues: list[Issue] = []
    hardware, hardware_source, values = None, "", []
    for text in texts:
        name = plain_hardware(text)
        if name is not None:
            hardware, hardware_source = name, source_of(text)
            continue
        if parser is None:
            from hydra.core.override_parser.overrides_parser import OverridesParser

            parser = OverridesParser.create()
        try:
            parsed = parser.parse_override(text)
        except Exception as exc:  # Hydra raises OverrideParseException and friends
            issues.append(
                Issue(f"cannot parse override: {_first_line(exc)}", source=source_of(text), hint=GRAMMAR_HINT)
            )
            continue
        problem = _problem(parsed)
        key = parsed.key_or_group
        if problem:
            issues.append(Issue(problem, key=key, source=source_of(text), hint=GRAMMAR_HINT))
        elif key == HARDWARE and not parsed.is_delete():
            hardware, hardware_source = _hardware_choice(parsed, text, issues), source_of(text)
        else:
            value = None if parsed.is_delete() else parsed.value()
            values.append(Override(text, tuple(key.split(".")), value, parsed.is_delete()))
    if issues:
        raise ConfigError(issues)
    return ParsedOverrides(hardware, hardware_source, tuple(values))


def _problem(parsed: Any) -> str:
    if parsed.is_sweep_override():
        return "sweeps (a=1,2 or range/choice) are not supported: trinity resolves one config at a time"
    if parsed.package is not None:
        return "package overrides (key@package) are not supported"
    return ""


def _hardware_choice(parsed: Any, text: str, issues: list[Issue]) -> str | None:
    value = parsed.value()
    if isinstance(value, str) and value:
        return value
    issues.append(
        Issue(
            "expects a profile name",
            key=HARDWARE,
            source=source_of(text),
            hint="e.g. hardware=ascend910b; see `trinity profile list`",
        )
    )
    return None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
