"""Problems with what a user gave us (config, profile, override, cluster): one record per problem,
collected into one report. Below every layer, so platforms, config, launch and cli all raise them."""

from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher, get_close_matches
from typing import Literal

Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class Issue:
    """One problem (or notice) about one key, with where its value came from."""

    message: str
    key: str = ""
    source: str = ""
    allowed: str = ""
    hint: str = ""
    severity: Severity = "error"

    def render(self) -> str:
        """The issue as the lines a user reads."""
        head = ": ".join(part for part in (self.source, self.key, self.message) if part)
        lines = [f"{self.severity}: {head}"]
        if self.allowed:
            lines.append(f"    allowed: {self.allowed}")
        if self.hint:
            lines.append(f"    hint: {self.hint}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """The issue as JSON-ready data (every field, empty ones too, so readers need no defaults)."""
        return dict(self.__dict__)


class ConfigError(Exception):
    """Every error found in one pass; raised only when there is at least one."""

    def __init__(self, issues: Iterable[Issue]):
        self.issues = list(issues)
        super().__init__(self.report())

    def report(self) -> str:
        """All issues, errors first, under one heading."""
        errors = [i for i in self.issues if i.severity == "error"]
        noun = "problem" if len(errors) == 1 else "problems"
        body = "\n".join(i.render() for i in sorted(self.issues, key=_order))
        return f"trinity: {len(errors)} {noun} in the config\n{body}"


def _order(issue: Issue) -> tuple:
    # errors first, then by file and position, so a report reads top to bottom like the file
    file, line, col = split_source(issue.source)
    return (issue.severity != "error", file, line or 0, col or 0, issue.key)


def split_source(source: str) -> tuple[str, int | None, int | None]:
    """'file:line:col' -> (file, line, col); other sources (an override, a rule) -> (source, None, None)."""
    parts = source.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return parts[0], int(parts[1]), int(parts[2])
    return source, None, None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """A hint naming the closest candidate, or ''."""
    candidates = list(candidates)
    close = get_close_matches(word, candidates, n=3, cutoff=0.6)
    best = [c for c in close if _ratio(word, c) == _ratio(word, close[0])] if close else []
    best = sorted(best) or [c for c in candidates if word and c.startswith(word)][:1]
    return f"did you mean {' or '.join(repr(c) for c in best)}?" if best else ""


def _ratio(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


def undotted(key: str) -> tuple:
    """'a[0].b' or 'a.0.b' -> ('a', 0, 'b')."""
    parts = key.replace("[", ".").replace("]", "").split(".")
    return tuple(int(p) if p.isdigit() else p for p in parts if p)


def dotted(path: tuple) -> str:
    """('a', 0, 'b') -> 'a[0].b'."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
