"""Why each resolved value is what it is: every layer that set it, lowest first, and the rules that derived it."""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, Issue, did_you_mean, dotted, undotted
from .merge import flat
from .provenance import Provenance
from .redact import MASK, is_secret_name
from .resolve import ResolvedConfig


@dataclass(frozen=True)
class Step:
    """One layer's value for a key; all but the last are overridden."""

    layer: str
    source: str
    value: Any
    inputs: tuple[str, ...]
    overridden: bool


@dataclass(frozen=True)
class Explanation:
    key: str
    value: Any
    steps: tuple[Step, ...]

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return {"key": self.key, "value": self.value, "chain": [step.__dict__ for step in self.steps]}


def explain(
    resolved: ResolvedConfig, keys: Iterable[str] = (), show_secrets: bool = False, stage: str | None = None
) -> list[Explanation]:
    """Explanations of the given keys (a section means every key under it), or of every key; of one stage's config
    when `stage` names one."""
    config, provenance = resolved.of(stage)
    data = config.model_dump(mode="json")
    paths = list(flat(data))
    wanted = [undotted(k) for k in keys]
    unknown = [k for k, w in zip(keys, wanted) if not any(p[: len(w)] == w for p in paths)]
    if unknown:
        names = sorted({dotted(p) for p in paths})
        raise ConfigError(
            [
                Issue(
                    "no such key in the resolved config",
                    key=k,
                    hint=did_you_mean(k, names) or "see `trinity config render`",
                )
                for k in unknown
            ]
        )
    chosen = [p for p in paths if not wanted or any(p[: len(w)] == w for w in wanted)]
    return [_explain(provenance, p, _value(data, p), show_secrets) for p in chosen]


def _explain(provenance: Provenance, path: tuple, value: Any, show_secrets: bool) -> Explanation:
    chain = provenance.chain(path)
    hide = not show_secrets and any(is_secret_name(part) for part in path if isinstance(part, str))

    def shown(v: Any) -> Any:
        return MASK if hide and v not in (None, "") else v

    steps = [Step(c.layer, c.source, shown(c.value), c.inputs, i < len(chain) - 1) for i, c in enumerate(chain)]
    return Explanation(
        dotted(path),
        shown(value),
        tuple(steps) or (Step("schema", _default_source(provenance, path), shown(value), (), False),),
    )


def _default_source(provenance: Provenance, path: tuple) -> str:
    """A default pydantic filled inside an item (say a task set) that a layer wrote without this key."""
    for end in range(len(path) - 1, 0, -1):
        if provenance.chain(path[:end]):
            return f"schema default (in {dotted(path[:end])}, {provenance.where(path[:end])})"
    return "schema default"


def _value(data: Any, path: tuple) -> Any:
    for part in path:
        data = data[part]
    return data


def render_text(explanations: list[Explanation]) -> str:
    """Explanations for a person: one block per key, overridden layers marked."""
    lines = []
    for item in explanations:
        lines.append(f"{item.key} = {item.value!r}")
        for step in item.steps:
            head = f"    {step.layer:<8} {step.source:<44} {step.value!r}"
            tail = "  (overridden)" if step.overridden else ""
            inputs = f"  <- {', '.join(step.inputs)}" if step.inputs and step.layer == "rule" else ""
            lines.append(head + tail + inputs)
    return "\n".join(lines) + "\n"
