"""Check a live Ray cluster against the resolved config before any actor starts.

Upstream read only the `GPU` key and divided by it: an NPU-only cluster crashed. Here the key
comes from the hardware profile, and every mismatch is one clear error.
"""

from dataclasses import dataclass
from typing import Optional

from ..config.compose import ClusterLayer, Request
from ..config.errors import ConfigError, Issue
from ..config.resolve import ResolvedConfig, resolve
from ..platforms import PLATFORMS, accelerator_keys

USER_LAYERS = ("conf", "file", "override", "stage")


@dataclass(frozen=True)
class Node:
    """One alive Ray node and what it offers."""

    node_id: str
    resources: dict[str, float]


def nodes_from_ray(ray_nodes: list[dict]) -> list[Node]:
    """Alive nodes from `ray.nodes()`."""
    return [Node(n["NodeID"], dict(n.get("Resources", {}))) for n in ray_nodes if n.get("Alive")]


def live_nodes() -> list[Node]:
    """Alive nodes of the Ray cluster this driver is connected to (ray.init must have run)."""
    import ray

    return nodes_from_ray(ray.nodes())


def resolve_on_cluster(request: Request, nodes: list[Node], strict: bool = False) -> ResolvedConfig:
    """Resolve, then reconcile with the cluster: gpu_per_node left unset is taken from it; mismatches are errors."""
    resolved = resolve(request, strict)
    per_node = cluster_gpu_per_node(resolved, nodes)
    if per_node is not None:  # the cluster, not the profile, says how many devices a node has
        key = resolved.config.hardware.ray_resource_key
        layer = ClusterLayer(per_node, f"Ray cluster ({per_node} {key} per node)")
        resolved = resolve(Request(request.config, request.overrides, request.profile_dirs, request.probes, layer), strict)
    check_fits(resolved, nodes)
    return resolved


def cluster_gpu_per_node(resolved: ResolvedConfig, nodes: list[Node]) -> Optional[int]:
    """Devices per node the cluster offers on node_num nodes, when the user left gpu_per_node to the profile."""
    counts = _counts(resolved, nodes)
    if resolved.provenance.set_by(("cluster", "gpu_per_node"), *USER_LAYERS):
        return None
    wanted = resolved.config.cluster.node_num
    return counts[wanted - 1] if len(counts) >= wanted else counts[-1]


def check_fits(resolved: ResolvedConfig, nodes: list[Node]) -> None:
    """node_num nodes must each offer gpu_per_node devices."""
    config, counts = resolved.config, _counts(resolved, nodes)
    key, per_node, wanted = config.hardware.ray_resource_key, config.cluster.gpu_per_node, config.cluster.node_num
    able = [c for c in counts if c >= per_node]
    if len(able) < wanted:
        where = resolved.provenance.where(("cluster", "gpu_per_node"))
        raise ConfigError(
            [
                Issue(
                    f"the run needs {wanted} node(s) with {per_node} {key} each; the Ray cluster's nodes offer {key}: {_listing(counts)}",
                    key="cluster.gpu_per_node",
                    source=where,
                    allowed=f"gpu_per_node <= {counts[0]}" + (f" on {wanted} node(s)" if wanted > 1 else ""),
                    hint="lower cluster.gpu_per_node or cluster.node_num, or add nodes to the cluster",
                )
            ]
        )


def _counts(resolved: ResolvedConfig, nodes: list[Node]) -> list[int]:
    """Device counts of the nodes that have any, largest first; none at all is an error."""
    key = resolved.config.hardware.ray_resource_key
    counts = sorted((int(n.resources.get(key, 0)) for n in nodes if n.resources.get(key, 0) >= 1), reverse=True)
    if not counts:
        raise _no_devices(resolved, nodes)
    return counts


def _no_devices(resolved: ResolvedConfig, nodes: list[Node]) -> ConfigError:
    hardware = resolved.config.hardware
    offered = sorted({k for n in nodes for k in n.resources if k in accelerator_keys()})
    types = [p.device_type for p in PLATFORMS.values() if p.ray_resource_key in offered]
    hint = (
        f"this cluster has {', '.join(offered)}: choose a profile with device_type {' or '.join(types)} (hardware=auto on one of its nodes picks one)"
        if offered
        else f"start each node's Ray with {hardware.ray_resource_key} resources, or choose hardware=cpu"
    )
    summary = "; ".join(f"{n.node_id[:8]}: {_resources(n)}" for n in nodes) or "no alive nodes"
    return ConfigError(
        [
            Issue(
                f"profile {hardware.name} needs Ray resource {hardware.ray_resource_key!r}, and no node of the cluster offers it ({summary})",
                key="hardware",
                source=hardware.selected_by,
                hint=hint,
            )
        ]
    )


def _resources(node: Node) -> str:
    shown = {k: v for k, v in node.resources.items() if k in accelerator_keys() or k == "CPU"}
    return ", ".join(f"{k}={v:g}" for k, v in sorted(shown.items()))


def _listing(counts: list[int]) -> str:
    return ", ".join(str(c) for c in counts)
