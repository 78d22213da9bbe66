"""The launch plan, its feasibility and the actors' placements, for a person."""

from collections.abc import Sequence
from typing import Any

from ..config.redact import MASK, redact
from .feasibility import Feasibility
from .launcher import Placement
from .plan import LaunchPlan


def plan_data(plan: LaunchPlan, show_secrets: bool = False) -> dict[str, Any]:
    """The plan as JSON-ready data, credential-like env values masked unless `show_secrets` (actors get them all)."""
    data = plan.as_dict()
    if show_secrets:
        return data
    shown = redact(data)
    for actor in shown["actors"]:  # a credential in a variable of any name (an external model's API key)
        actor["env"] = _masked_env(actor["env"], actor["env_masked"])
    return shown


def plan_text(plan: LaunchPlan, feasibility: Feasibility | None = None, show_secrets: bool = False) -> str:
    """Groups, actors and each role's environment as aligned tables; credential-like values masked unless
    `show_secrets`."""
    lines = [
        f"launch plan for {plan.hardware} ({plan.device_type}, Ray resource {plan.resource_key}), namespace "
        f"{plan.namespace}",
        "",
        "placement groups:",
    ]
    lines += _table(
        ["NAME", "STRATEGY", "BUNDLES"], [[g.name, g.strategy, _bundles(g.bundles)] for g in plan.placement_groups]
    )
    lines += ["", "actors:"]
    rows = [
        [a.name, a.role, f"{a.placement_group}[{a.bundle_index}]" if a.placement_group else "-", _options(a.options)]
        for a in plan.actors
    ]
    lines += _table(["NAME", "ROLE", "GROUP[BUNDLE]", "OPTIONS"], rows)
    lines += ["", "environment by role:"]
    seen = set()
    for actor in plan.actors:
        if actor.role in seen:
            continue
        seen.add(actor.role)
        env = actor.env if show_secrets else _masked_env(actor.env, actor.env_masked)
        shown = " ".join(f"{k}={v}" + (" (exported)" if k in actor.env_exported else "") for k, v in env.items())
        lines.append(f"  {actor.role}: {shown}")
    if feasibility:
        lines += ["", "fits the cluster:" if feasibility.ok else "does NOT fit the cluster:"] + [
            f"  {line}" for line in feasibility.lines
        ]
    return "\n".join(lines) + "\n"


def placements_text(placements: list[Placement]) -> str:
    """Where each actor landed and whether that matches the plan."""
    rows = [[p.actor, p.node_id[:12], p.visible_devices or "-", p.device, p.problem or "ok"] for p in placements]
    return "\n".join(_table(["ACTOR", "NODE", "VISIBLE", "DEVICE", "CHECK"], rows)) + "\n"


def _bundles(bundles: tuple) -> str:
    groups: dict[str, int] = {}
    for bundle in bundles:
        text = "{" + ", ".join(f"{k}: {v:g}" for k, v in bundle.items()) + "}"
        groups[text] = groups.get(text, 0) + 1
    return ", ".join(f"{n} x {text}" for text, n in groups.items())


def _options(options: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in options.items())


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    return ["  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head, *rows]]


def _masked_env(env: dict, masked: Sequence[str]) -> dict:
    """`env` with credential-like names masked (redact) and the variables `masked` names too, whatever their names
    (an external model's API key)."""
    return redact(env) | {k: MASK for k in masked if env.get(k)}
