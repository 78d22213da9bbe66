"""Can the plan be placed on these nodes? Ray never says no (an unplaceable group stays PENDING
forever), so this answers first, group by group, in the order the launcher creates them."""

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from .plan import LaunchPlan, PlacementGroupSpec
from .reconcile import Node


@dataclass(frozen=True)
class Feasibility:
    ok: bool
    lines: tuple[str, ...]  # one per group, and one for the actors outside groups
    placement: dict[str, tuple[str, ...]] = field(default_factory=dict)  # group -> node id of each bundle


class _Pool:
    """Free resources per node, kept sorted by the device key so a best fit is a binary search."""

    def __init__(self, nodes: list[Node], key: str):
        self.key = key
        self.free = {n.node_id: dict(n.free) for n in nodes}
        self.order = sorted((res.get(key, 0), node) for node, res in self.free.items())

    def best_fit(self, need: dict[str, float]) -> str | None:
        """The node with the least room for the device key that still fits `need`."""
        start = bisect.bisect_left(self.order, (need.get(self.key, 0) - 1e-9, ""))
        return next((node for _, node in self.order[start:] if self.fits(need, node)), None)

    def fits(self, need: dict[str, float], node: str) -> bool:
        res = self.free[node]
        return all(res.get(k, 0) + 1e-9 >= v for k, v in need.items())

    def take(self, need: dict[str, float], node: str) -> None:
        res = self.free[node]
        del self.order[bisect.bisect_left(self.order, (res.get(self.key, 0), node))]
        for k, v in need.items():
            res[k] = res.get(k, 0) - v
        bisect.insort(self.order, (res.get(self.key, 0), node))

    def listing(self, key: str) -> str:
        """Free amounts, largest first: '8 and 8 and 0', or the first four of many."""
        if key == self.key:  # already sorted: no pass over every node for each group
            amounts = [amount for amount, _ in self.order[:-5:-1]]
        else:
            amounts = sorted((res.get(key, 0) for res in self.free.values()), reverse=True)[:4]
        shown = " and ".join(f"{a:g}" for a in amounts)
        return shown if len(self.free) <= 4 else f"{', '.join(f'{a:g}' for a in amounts)} ... ({len(self.free)} nodes)"


def check(plan: LaunchPlan, nodes: list[Node]) -> Feasibility:
    """Place every group (STRICT_PACK on one node; PACK on as few nodes as it can), then the free actors."""
    pool = _Pool(nodes, plan.resource_key)
    lines, placement, ok = [], {}, True
    for group in plan.placement_groups:
        before = pool.listing(plan.resource_key)
        where = (_strict_pack if group.strategy == "STRICT_PACK" else _pack)(group, pool)
        if where is None:
            ok = False
            lines.append(_failure(group, pool))
        else:
            placement[group.name] = tuple(where)
            lines.append(_success(group, before, where, plan.resource_key))
    # an actor of 0 CPUs fits anywhere
    loose = [a for a in plan.actors if a.placement_group is None and a.options.get("num_cpus", 0)]
    need = {"CPU": sum(a.options.get("num_cpus", 0) for a in loose)}
    if loose and not any(pool.fits(need, node) for node in pool.free):
        ok = False
        names = ", ".join(a.name for a in loose)
        lines.append(
            f"{names} need{'s' if len(loose) == 1 else ''} {_fmt(need)} outside the groups; the nodes have "
            f"{_free(pool, ['CPU'])}: does not fit"
        )
    return Feasibility(ok, tuple(lines), placement)


def _strict_pack(group: PlacementGroupSpec, pool: _Pool) -> list[str] | None:
    need = group.total()
    node = pool.best_fit(need)
    if node is None:
        return None
    pool.take(need, node)
    return [node] * len(group.bundles)


def _pack(group: PlacementGroupSpec, pool: _Pool) -> list[str] | None:
    """Fill one node before opening the next; all or nothing, as Ray places a group."""
    where: list[str] = []
    for bundle in group.bundles:
        node = where[-1] if where and pool.fits(bundle, where[-1]) else pool.best_fit(bundle)
        if node is None:
            for placed, taken in zip(where, group.bundles):  # give back what this group took
                pool.take({k: -v for k, v in taken.items()}, placed)
            return None
        pool.take(bundle, node)
        where.append(node)
    return where


def _success(group: PlacementGroupSpec, before: str, where: list[str], key: str) -> str:
    nodes = len(set(where))
    return (
        f"{group.name} needs {_fmt(group.total())} in {group.strategy}; nodes have {before} {key} free: fits on "
        f"{nodes} node{'s' if nodes > 1 else ''}"
    )


def _failure(group: PlacementGroupSpec, pool: _Pool) -> str:
    """What the group needs and, for each resource that is short, how much of it each node has free."""
    total = group.total()
    if group.strategy == "STRICT_PACK":
        short = [k for k in total if _largest(pool, k) + 1e-9 < total[k]]
        head = f"{group.name} needs {_fmt(total)} on one node ({group.strategy})"
        if short:
            return (
                f"{head}; the largest free is {' and '.join(f'{_largest(pool, k):g} {k}' for k in short)}: does not fit"
            )
        return f"{head}; no node has all of it free at once ({_free(pool, total)}): does not fit"
    head = (
        f"{group.name} needs {_fmt(total)} in {group.strategy} ({len(group.bundles)} bundles of "
        f"{_fmt(group.bundles[0])})"
    )
    short = [k for k in total if _bundles_fitting(pool, group, k) < len(group.bundles)]
    if short:
        return f"{head}; nodes have {_free(pool, short)}: does not fit"
    return f"{head}; nodes have {_free(pool, total)}, but not together on enough nodes: does not fit"


def _largest(pool: _Pool, key: str) -> float:
    return max((res.get(key, 0) for res in pool.free.values()), default=0)


def _bundles_fitting(pool: _Pool, group: PlacementGroupSpec, key: str) -> int:
    """How many of the group's bundles the nodes could hold if `key` were the only resource."""
    per_bundle = max(b.get(key, 0) for b in group.bundles)
    if per_bundle <= 0:
        return len(group.bundles)
    return int(sum((res.get(key, 0) + 1e-9) // per_bundle for res in pool.free.values()))


def _free(pool: _Pool, keys: Iterable[str]) -> str:
    """'4 and 0 CPU free', or '8 and 0 NPU, 0 and 8 CPU free'."""
    return ", ".join(f"{pool.listing(k)} {k}" for k in keys) + " free"


def _fmt(resources: dict[str, float]) -> str:
    return " + ".join(f"{v:g} {k}" for k, v in resources.items())
