"""Derivation: one ordered pass of small pure rules over the validated tree, each recording provenance."""

from typing import Any

from ...errors import Issue
from ..profiles import LoadedProfile
from ..provenance import Provenance
from . import cluster, env, hardware, model, sync
from ._context import Context

# Order matters: counts need gpu_per_node; the sync world size needs the counts; env needs the sync timeout.
RULES = (
    hardware.hardware_section,
    hardware.trainer_device,
    hardware.process_group_backend,
    hardware.torch_compile,
    hardware.trainer_strategy,
    hardware.dtypes,
    model.model_budget,
    model.rollout_model,
    cluster.gpu_per_node,
    cluster.cluster_counts,
    sync.sync_method,
    env.env_when,
    env.collective_timeouts,
    env.explorer_env_vars,
)


def derive(data: dict[str, Any], loaded: LoadedProfile, provenance: Provenance, selection: str = "") -> tuple[dict[str, Any], list[Issue]]:
    """The filled tree and every error, warning and note the rules raised."""
    ctx = Context(data, loaded, provenance, selection)
    for rule in RULES:
        rule(ctx)
    return ctx.data, ctx.issues
