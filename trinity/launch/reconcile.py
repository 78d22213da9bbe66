"""Check a live Ray cluster against the resolved config before any actor starts.

Upstream read only the `GPU` key and divided by it: an NPU-only cluster crashed. Here the key
comes from the hardware profile, and every mismatch is one clear error.
"""

from dataclasses import dataclass

from ..config.compose import ClusterLayer, Request
from ..config.resolve import ResolvedConfig, resolve
from ..config.run_target import RunTarget, on_cluster, run_target
from ..config.schema.cluster import ClusterConfig
from ..errors import Issue, PlacementError
from ..platforms import PLATFORMS, accelerator_keys


@dataclass(frozen=True)
class Node:
    """One alive Ray node: what it has, and what is free now (None: all of it)."""

    node_id: str
    resources: dict[str, float]
    available: dict[str, float] | None = None

    @property
    def free(self) -> dict[str, float]:
        return self.resources if self.available is None else self.available


def nodes_from_ray(ray_nodes: list[dict], available: dict[str, dict] | None = None) -> list[Node]:
    """Alive nodes from `ray.nodes()`, with free resources per node id when known."""
    free = available or {}
    return [Node(n["NodeID"], dict(n.get("Resources", {})), free.get(n["NodeID"])) for n in ray_nodes if n.get("Alive")]


def live_nodes() -> list[Node]:
    """Alive nodes of the Ray cluster this driver is connected to (ray.init must have run)."""
    import ray
    from ray._private.state import (
        available_resources_per_node,  # the per-node view Ray's autoscaler uses
    )

    return nodes_from_ray(ray.nodes(), available_resources_per_node())


def resolve_on_cluster(
    request: Request,
    nodes: list[Node],
    strict: bool = False,
    target: RunTarget | None = None,
    standalone: ResolvedConfig | None = None,
) -> ResolvedConfig:
    """Resolve against a live cluster: the devices its nodes offer (a gpu_per_node above them is lowered to them), and
    a gpu_per_node you left unset, come from it; a cluster with too few such nodes is an error.

    `standalone`, the config resolved without the cluster, is the answer when the cluster restates what it already
    has (the cluster's layer sets nothing else)."""
    target = target or run_target(request)
    counts = _counts(target.resource_key, nodes, target.profile, target.selection)
    on = on_cluster(request, target, counts)
    restated = standalone is not None and _restates(on.cluster, standalone.config.cluster)
    resolved = standalone if standalone is not None and restated else resolve(on, strict)
    check_fits(resolved, counts)
    return resolved


def _restates(layer: ClusterLayer, cluster: ClusterConfig) -> bool:
    """Whether the cluster's layer changes nothing the config resolved without it derived: the same gpu_per_node, and
    nodes offering at least that many devices (no gpu_per_node to lower); and where the config was resolved for what
    this machine offers (hardware=auto), the cluster's nodes offer as many (else a gpu_per_node lowered to this
    machine's devices would stay low)."""
    same_per_node = layer.gpu_per_node is None or layer.gpu_per_node == cluster.gpu_per_node
    same_nodes = cluster.node_devices in (None, layer.node_devices)
    return same_per_node and same_nodes and cluster.gpu_per_node <= layer.node_devices


def check_fits(resolved: ResolvedConfig, counts: list[int]) -> None:
    """node_num nodes must each offer gpu_per_node devices (a gpu_per_node above what the run's nodes offer was lowered
    to it already: what is left to refuse is too few nodes)."""
    config = resolved.config
    key, per_node, wanted = config.hardware.ray_resource_key, config.cluster.gpu_per_node, config.cluster.node_num
    able = [c for c in counts if c >= per_node]
    if len(able) < wanted:
        where = resolved.provenance.where(("cluster", "gpu_per_node"))
        raise PlacementError(
            [
                Issue(
                    f"the run needs {wanted} node(s) with {per_node} {key} each; the Ray cluster's nodes offer "
                    f"{key}: {_listing(counts)}",
                    key="cluster.gpu_per_node",
                    source=where,
                    allowed=f"gpu_per_node <= {counts[0]}" + (f" on {wanted} node(s)" if wanted > 1 else ""),
                    hint=f"set cluster.node_num={len(able)} (the nodes with {per_node} {key}), or add nodes to the "
                    "cluster",
                )
            ]
        )


def _counts(key: str, nodes: list[Node], profile: str, selection: str) -> list[int]:
    """Device counts of the nodes that have any, largest first; none at all is an error."""
    counts = sorted((int(n.resources.get(key, 0)) for n in nodes if n.resources.get(key, 0) >= 1), reverse=True)
    if not counts:
        raise _no_devices(key, nodes, profile, selection)
    return counts


def _no_devices(key: str, nodes: list[Node], profile: str, selection: str) -> PlacementError:
    offered = sorted({k for n in nodes for k in n.resources if k in accelerator_keys()})
    types = [p.device_type for p in PLATFORMS.values() if p.ray_resource_key in offered]
    hint = (
        f"this cluster has {', '.join(offered)}: choose a profile with device_type {' or '.join(types)} "
        "(hardware=auto on one of its nodes picks one)"
        if offered
        else f"start each node's Ray with {key} resources, or choose hardware=cpu"
    )
    summary = "; ".join(f"{n.node_id[:8]}: {_resources(n)}" for n in nodes) or "no alive nodes"
    return PlacementError(
        [
            Issue(
                f"profile {profile} needs Ray resource {key!r}, and no node of the cluster offers it ({summary})",
                key="hardware",
                source=selection,
                hint=hint,
            )
        ]
    )


def _resources(node: Node) -> str:
    shown = {k: v for k, v in node.resources.items() if k in accelerator_keys() or k == "CPU"}
    return ", ".join(f"{k}={v:g}" for k, v in sorted(shown.items()))


def _listing(counts: list[int]) -> str:
    return ", ".join(str(c) for c in counts)
