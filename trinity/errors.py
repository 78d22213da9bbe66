"""Problems with what a user gave us (config, profile, override, cluster): one record per problem,
collected into one report. Below every layer, so platforms, config, launch and cli all raise them."""

from collections.abc import Iterable
from dataclasses import dataclass
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
    """Every error found in one pass; raised only when there is at least one. The base of every problem trinity reports
    to a user (the CLI: exit code 2, the report, no traceback unless --debug); its headline says the problems are in
    the config, each subclass's says what other kind of problem it is."""

    def __init__(self, issues: Iterable[Issue]):
        self.issues = list(issues)
        super().__init__(self.report())

    def report(self) -> str:
        """All issues, errors first, under one heading."""
        errors = sum(i.severity == "error" for i in self.issues)
        body = "\n".join(i.render() for i in sorted(self.issues, key=_order))
        return f"trinity: {self.headline(errors)}\n{body}"

    def headline(self, errors: int) -> str:
        """What kind of problem this is, for `errors` errors."""
        return f"{errors} {_problems(errors)} in the config"


class _Kind(ConfigError):
    """A problem outside the config: its headline is `what`, with the count where there is more than one."""

    what = ""

    def headline(self, errors: int) -> str:
        return self.what if errors == 1 else f"{self.what} ({errors} {_problems(errors)})"


class PlacementError(_Kind):
    """The Ray cluster cannot place the run's plan: too few nodes or devices, or a group that was not placed in time."""

    what = "the cluster cannot place this run"


class ClusterError(_Kind):
    """The Ray cluster the run names cannot be reached."""

    what = "cannot reach the Ray cluster"


class LockError(_Kind):
    """The run directory is held by another live run."""

    what = "the run directory is in use"


class FetchError(_Kind):
    """A model or data set the run names by hub id cannot be had: no such repo, no access, no network, no space."""

    what = "cannot fetch what the run names on the hub"


class NodeError(_Kind):
    """This node's installed software stack (the vendor's toolkit and the packages paired with it) cannot run the
    profile."""

    what = "this node's software stack cannot run this profile"


def error_of(issues: Iterable[Issue], node: Iterable[Issue] = (), fetching: Iterable[Issue] = ()) -> ConfigError:
    """The error of every issue found in one pass: a NodeError when the only errors are `node`'s (this node's software
    stack), a FetchError when they are only `fetching`'s (names of hub repos that cannot be had), else a ConfigError."""
    issues, node, fetching = list(issues), list(node), list(fetching)
    errors = [kind for kind, found in (("config", issues), ("node", node), ("fetch", fetching)) if _has_error(found)]
    kind = {("node",): NodeError, ("fetch",): FetchError}.get(tuple(errors), ConfigError)
    return kind(issues + fetching + node)


def _has_error(issues: list[Issue]) -> bool:
    return any(i.severity == "error" for i in issues)


def _problems(count: int) -> str:
    return "problem" if count == 1 else "problems"


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
    from difflib import get_close_matches

    close = get_close_matches(word, candidates, n=3, cutoff=0.6)
    best = [c for c in close if _ratio(word, c) == _ratio(word, close[0])] if close else []
    best = sorted(best) or [c for c in candidates if word and c.startswith(word)][:1]
    return f"did you mean {' or '.join(repr(c) for c in best)}?" if best else ""


def _ratio(a: str, b: str) -> float:
    from difflib import SequenceMatcher

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
