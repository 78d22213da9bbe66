"""Rule that sizes each role's compute threads where the devices are host cores (facts.compute_threads).

A CPU slot is one core. Ray gives an actor one thread per CPU it grants, so a trainer rank and a rollout engine that
take turns (strictly on-policy sync, or colocate) would each leave the other's core idle while it computes; with
`turns_share_node` each uses the node's slots on its turn. So do the ranks of a train-only stage laid out beside such
a stage (the demo's SFT: no engine computes, the next stage's engines wait beside it): the ranks then start with the
next stage's thread count, and an actor is kept at a handover only with the same env.
"""

from typing import Any

from .. import modes
from ..engines import devices_per_engine
from ._context import SYNC_KEYS, Context
from ._rule import rule

# each explore step waits for the last train step (explorer and trainer intervals, None: sync_interval)
ALTERNATE = {"sync_style": "fixed", "explorer_sync_interval": 1, "trainer_sync_interval": 1, "sync_offset": 0}


@rule(
    reads=(
        "cluster.gpu_per_node",
        "cluster.node_num",
        "cluster.rollout_gpu_num",
        "cluster.train_stage_devices",
        "cluster.trainer_gpu_num_per_node",
        "env.common.OMP_NUM_THREADS",
        "env.trainer.OMP_NUM_THREADS",
        "explorer.rollout_model.data_parallel_size",
        "explorer.rollout_model.pipeline_parallel_size",
        "explorer.rollout_model.tensor_parallel_size",
        "mode",
        "synchronizer.explorer_sync_interval",
        "synchronizer.sync_interval",
        "synchronizer.sync_offset",
        "synchronizer.sync_style",
        "synchronizer.trainer_sync_interval",
    ),
    writes=("env.rollout.OMP_NUM_THREADS", "env.trainer.OMP_NUM_THREADS"),
    # the rollout's value as written: explorer.env_vars (explorer_env_vars, later) may still set it, and wins
    before=("env.rollout.OMP_NUM_THREADS",),
)
def compute_threads(ctx: Context) -> None:
    """env.trainer and env.rollout `<facts.compute_threads.env>`: the slots each actor computes with."""
    spec = ctx.facts.compute_threads
    if spec is None:
        return
    entry, per_node = modes.mode(ctx.get("mode")), ctx.get("cluster.gpu_per_node")
    turns = spec.turns_share_node and takes_turns(ctx)
    inputs = (ctx.fact("compute_threads"), ctx.input("mode"), ctx.input("cluster.gpu_per_node"))
    if turns:
        inputs += tuple(ctx.input(f"synchronizer.{key}") for key in SYNC_KEYS)
    beside = ctx.stage_beside()
    beside_turns = spec.turns_share_node and beside is not None and alternates(beside.mode, beside.sync)
    if beside_turns:
        inputs += (ctx.stage_devices_input(), f"the stage beside: mode {beside.mode!r}, {beside.sync}")
    if entry.trains:
        ranks = ctx.get("cluster.trainer_gpu_num_per_node")
        _set(ctx, "trainer", spec.env, per_node // ranks if (turns or beside_turns) and ranks else 1, inputs)
    if entry.runs_engines:
        slots = min(devices_per_engine(ctx.get("explorer.rollout_model")), per_node)  # one actor per node it spans
        engines = max(1, min(ctx.get("cluster.rollout_gpu_num"), per_node) // slots)  # on one node
        _set(ctx, "rollout", spec.env, per_node // engines if turns else slots, inputs)


def takes_turns(ctx: Context) -> bool:
    """Whether this stage's rollout and training never compute at once (`alternates`)."""
    return alternates(ctx.get("mode"), {key: ctx.get(f"synchronizer.{key}") for key in SYNC_KEYS})


def alternates(mode: str, sync: dict[str, Any] | None) -> bool:
    """Whether rollout and training in `mode` with these synchronizer settings never compute at once: colocated, or
    every explore step waits for the weights of the train step before it (fixed sync every step, no offset)."""
    entry = modes.mode(mode)
    if entry.shares_devices:
        return True
    if sync is None or not (entry.explores and entry.trains):
        return False
    every = {key: sync.get(key) or sync["sync_interval"] for key in ("explorer_sync_interval", "trainer_sync_interval")}
    return {**{key: sync[key] for key in ("sync_style", "sync_offset")}, **every} == ALTERNATE


def _set(ctx: Context, role: str, var: str, threads: int, inputs: tuple[str, ...]) -> None:
    key = f"env.{role}.{var}"
    if not ctx.user_set(key) and not ctx.user_set(f"env.common.{var}"):  # a person's value wins wherever written
        ctx.set(key, str(threads), "compute_threads", inputs)
