"""Key-by-key comparison of two resolved configs."""

from dataclasses import dataclass
from typing import Any

from ..errors import dotted
from .merge import flat

ABSENT = "(absent)"


@dataclass(frozen=True)
class Change:
    key: str
    left: Any
    right: Any

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"key": self.key, "left": self.left, "right": self.right}


def diff(left: dict, right: dict) -> list[Change]:
    """Every key whose value differs, is only on the left, or only on the right."""
    flat_left, flat_right = flat(left), flat(right)
    keys = list(flat_left) + [k for k in flat_right if k not in flat_left]
    return [
        Change(dotted(k), flat_left.get(k, ABSENT), flat_right.get(k, ABSENT))
        for k in keys
        if flat_left.get(k, ABSENT) != flat_right.get(k, ABSENT)
    ]


def render_text(changes: list[Change], left: str, right: str) -> str:
    """A unified-diff-like listing."""
    lines = [f"--- {left}", f"+++ {right}"]
    lines += [
        f"~ {c.key}: {c.left!r} -> {c.right!r}" if ABSENT not in (c.left, c.right) else _one_sided(c) for c in changes
    ]
    return "\n".join(lines) + "\n"


def _one_sided(change: Change) -> str:
    return f"- {change.key}: {change.left!r}" if change.right == ABSENT else f"+ {change.key}: {change.right!r}"
