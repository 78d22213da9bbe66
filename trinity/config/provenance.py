"""Where each value came from: every layer that set a key, in order, and the rules that derived one."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .merge import MISSING, leaves

Layer = Literal["schema", "conf", "profile", "cluster", "file", "override", "stage", "rule"]
# layers a person wrote (not defaults, profiles or rules)
WRITTEN: tuple[Layer, ...] = (
    "conf",
    "file",
    "override",
    "stage",
)


@dataclass(frozen=True)
class Contribution:
    """One layer's value for one key; rules also name the inputs they read."""

    layer: Layer
    source: str
    value: Any
    inputs: tuple[str, ...] = ()


@dataclass
class Provenance:
    """Key path -> contributions, lowest layer first."""

    by_path: dict[tuple, list[Contribution]] = field(default_factory=dict)
    sections: dict[tuple, str] = field(default_factory=dict)  # where each mapping key was last written

    def record_tree(self, layer: Layer, tree: dict, where: Callable[[tuple], str]) -> None:
        """Record every leaf of a layer's tree, and where its sections were written."""
        for path, value in leaves(tree):
            if path and not (value == MISSING and self.by_path.get(path)):  # a later ??? does not override
                self.add(path, Contribution(layer, where(path), value))
        for path in _sections(tree):
            self.sections[path] = where(path)

    def record_sections(self, paths: list[tuple], source: str) -> None:
        """Record where sections were written that no recorded tree holds (those an override creates)."""
        for path in paths:
            self.sections[path] = source

    def add(self, path: tuple, contribution: Contribution) -> None:
        """Record one contribution."""
        self.by_path.setdefault(path, []).append(contribution)

    def chain(self, path: tuple) -> list[Contribution]:
        """Every contribution to `path`, lowest layer first."""
        return list(self.by_path.get(path, []))

    def last(self, path: tuple) -> Contribution | None:
        """The winning contribution for `path` or its nearest recorded parent."""
        for end in range(len(path), 0, -1):
            if self.by_path.get(path[:end]):
                return self.by_path[path[:end]][-1]
        return None

    def where(self, path: tuple) -> str:
        """Source of the value at `path`: a file position, an override, or a rule."""
        if path in self.sections and not self.by_path.get(path):
            return self.sections[path]
        last = self.last(path)
        return last.source if last else ""

    def written_where(self, path: tuple) -> str:
        """Where the value at `path`, or its nearest written parent, was written (a rule's output does not count)."""
        for end in range(len(path), 0, -1):
            written = [c for c in self.by_path.get(path[:end], []) if c.layer != "rule"]
            if path[:end] in self.sections and (not written or written[-1].layer == "schema"):
                return self.sections[path[:end]]  # a mapping written where the schema has a null leaf
            if written:
                return written[-1].source
        return self.where(path)

    def set_by(self, path: tuple, *layers: Layer) -> bool:
        """Whether any of `layers` set `path` itself."""
        return any(c.layer in layers for c in self.by_path.get(path, []))

    def copy(self) -> "Provenance":
        """An independent copy (stages add to it without touching the root's)."""
        return Provenance({path: list(chain) for path, chain in self.by_path.items()}, dict(self.sections))


def _sections(tree: dict, prefix: tuple = ()):
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield prefix + (key,)
            yield from _sections(value, prefix + (key,))
