"""Can the plan be placed on these nodes? Ray never says no (an unplaceable group stays PENDING
forever), so this answers first, group by group, in the order the launcher creates them."""

from dataclasses import dataclass, field

from .plan import LaunchPlan, PlacementGroupSpec
from .reconcile import Node


@dataclass(frozen=True)
class Feasibility:
    ok: bool
    lines: tuple[str, ...]  # one per group, and one for the actors outside groups
    placement: dict[str, tuple[str, ...]] = field(default_factory=dict)  # group -> node id of each bundle


def check(plan: LaunchPlan, nodes: list[Node]) -> Feasibility:
    """Place every group (STRICT_PACK on one node; PACK on as few nodes as it can), then the free actors."""
    free = {n.node_id: dict(n.free) for n in nodes}
    lines, placement, ok = [], {}, True
    for group in plan.placement_groups:
        before = _listing(free, plan.resource_key)
        place = _strict_pack if group.strategy == "STRICT_PACK" else _pack
        where = place(group, free)
        if where is None:
            ok = False
            lines.append(_failure(group, before, free, plan.resource_key))
        else:
            placement[group.name] = tuple(where)
            lines.append(_success(group, before, where, plan.resource_key))
    loose = [a for a in plan.actors if a.placement_group is None]
    if loose:
        need = {"CPU": sum(a.options.get("num_cpus", 0) for a in loose)}
        if _place_one(need, free) is None:
            ok = False
            lines.append(f"{', '.join(a.name for a in loose)} need{'s' if len(loose) == 1 else ''} {_fmt(need)} outside the groups; the nodes have {_listing(free, 'CPU')} CPU free: does not fit")
    return Feasibility(ok, tuple(lines), placement)


def _strict_pack(group: PlacementGroupSpec, free: dict[str, dict]) -> list[str] | None:
    need = group.total()
    node = _place_one(need, free)
    return None if node is None else [node] * len(group.bundles)


def _pack(group: PlacementGroupSpec, free: dict[str, dict]) -> list[str] | None:
    trial = {node: dict(res) for node, res in free.items()}
    used: list[str] = []
    where = []
    for bundle in group.bundles:
        node = next((n for n in used if _fits(bundle, trial[n])), None) or _place_one(bundle, trial, take=False)
        if node is None:
            return None
        _take(bundle, trial[node])
        used += [] if node in used else [node]
        where.append(node)
    free.update(trial)
    return where


def _place_one(need: dict[str, float], free: dict[str, dict], take: bool = True) -> str | None:
    """The node with the least room left that still fits `need` (best fit), or None."""
    fitting = [n for n, res in free.items() if _fits(need, res)]
    if not fitting:
        return None
    node = min(fitting, key=lambda n: sum(free[n].get(k, 0) - v for k, v in need.items()))
    if take:
        _take(need, free[node])
    return node


def _fits(need: dict[str, float], res: dict[str, float]) -> bool:
    return all(res.get(k, 0) + 1e-9 >= v for k, v in need.items())


def _take(need: dict[str, float], res: dict[str, float]) -> None:
    for key, value in need.items():
        res[key] = res.get(key, 0) - value


def _success(group: PlacementGroupSpec, before: str, where: list[str], key: str) -> str:
    total = group.total()
    nodes = len(set(where))
    return f"{group.name} needs {_fmt(total)} in {group.strategy}; nodes have {before} {key} free: fits on {nodes} node{'s' if nodes > 1 else ''}"


def _failure(group: PlacementGroupSpec, before: str, free: dict[str, dict], key: str) -> str:
    total = group.total()
    if group.strategy == "STRICT_PACK":
        largest = max((res.get(key, 0) for res in free.values()), default=0)
        return f"{group.name} needs {_fmt(total)} on one node ({group.strategy}); the largest free is {largest:g} {key}: does not fit"
    return f"{group.name} needs {_fmt(total)} in {group.strategy} ({len(group.bundles)} bundles of {_fmt(group.bundles[0])}); nodes have {before} {key} free: does not fit"


def _fmt(resources: dict[str, float]) -> str:
    return " + ".join(f"{v:g} {k}" for k, v in resources.items())


def _listing(free: dict[str, dict], key: str) -> str:
    amounts = sorted((res.get(key, 0) for res in free.values()), reverse=True)
    return " and ".join(f"{a:g}" for a in amounts) if len(amounts) <= 4 else f"{', '.join(f'{a:g}' for a in amounts[:4])} ... ({len(amounts)} nodes)"
