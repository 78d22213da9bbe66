"""What a run asks of Ray, read from the composed config before any derivation: where Ray is, the
namespace, and which resource key and node shape the cluster must offer.

The launch layer asks this module instead of composing the config itself; `on_cluster` turns what
a live cluster says into the request's cluster layer.
"""

from dataclasses import dataclass, replace

from ..errors import ConfigError
from .compose import RAY_AUTO as AUTO
from .compose import ClusterLayer, Composed, Request, compose, env_ray_address
from .derive.aliases import ASK_RAY
from .interpolate import resolve_interpolations
from .merge import get_path
from .provenance import WRITTEN


@dataclass(frozen=True)
class RunTarget:
    """Where the run's Ray is and what the run asks of it."""

    address: str | None  # None: a running local Ray, else start one
    address_source: str  # where the address was set: $RAY_ADDRESS, or cluster.ray_address's file:line:col
    namespace: str
    resource_key: str  # the Ray resource the profile's devices are counted by
    profile: str
    selection: str  # how the profile was chosen (for errors about it)
    node_num: int | None
    gpu_per_node_written: bool  # a person set cluster.gpu_per_node: the cluster does not decide it


def run_namespace(ray_namespace: str | None, project: str, name: str) -> str:
    """The Ray namespace of a run: ray_namespace, else <project>/<name>."""
    return ray_namespace or f"{project}/{name}"


def run_target(source: Request | Composed) -> RunTarget:
    """$RAY_ADDRESS, else cluster.ray_address unless 'auto'; the namespace; the profile's resource key."""
    composed = compose(source) if isinstance(source, Request) else source
    plain, issues = resolve_interpolations(composed.tree, composed.provenance.where)
    if issues:
        raise ConfigError(issues)
    ray_address = get_path(plain, ("cluster", "ray_address"), AUTO)
    from_env = env_ray_address()  # wins over the config
    chosen = from_env or ray_address
    address = None if chosen == AUTO else str(chosen)
    node_num, per_node = get_path(plain, ("cluster", "node_num")), get_path(plain, ("cluster", "gpu_per_node"))
    if node_num == 0:  # Trinity-RFT's "ask Ray": trinity's unset (derive/aliases.py)
        node_num = ASK_RAY["cluster.node_num"][0]
    return RunTarget(
        address,
        "$RAY_ADDRESS" if from_env else composed.provenance.where(("cluster", "ray_address")),
        run_namespace(plain.get("ray_namespace"), plain["project"], plain["name"]),
        composed.profile.profile.facts.ray_resource_key,
        composed.profile.name,
        composed.selection,
        node_num if isinstance(node_num, int) else None,
        composed.provenance.set_by(("cluster", "gpu_per_node"), *WRITTEN) and per_node != 0,  # 0: the cluster's
    )


def on_cluster(request: Request, target: RunTarget, counts: list[int]) -> Request:
    """`request` with what the cluster says (`counts`: devices per node, largest first) as its cluster layer: the
    devices each of the run's nodes offers, and gpu_per_node unless a person set it."""
    wanted = target.node_num
    per_node = counts[wanted - 1] if wanted and 0 < wanted <= len(counts) else counts[-1]
    source = f"Ray cluster ({per_node} {target.resource_key} per node)"
    return replace(request, cluster=ClusterLayer(None if target.gpu_per_node_written else per_node, per_node, source))
