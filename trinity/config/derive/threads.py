"""Rule that sizes each role's compute threads where the devices are host cores (facts.compute_threads).

A CPU slot is one core. Ray gives an actor one thread per CPU it grants, so a trainer rank and a rollout engine that
take turns (strictly on-policy sync, or colocate) would each leave the other's core idle while it computes; with
`turns_share_node` each uses the node's slots on its turn. So do the ranks of a train-only stage, where no engine
computes (an engine started beside it for the next stage waits): their thread count then matches the next stage's when
that one takes turns, so the ranks are kept at the handover.
"""

from .. import modes
from ..engines import devices_per_engine
from ._context import Context


def compute_threads(ctx: Context) -> None:
    """env.trainer and env.rollout `<facts.compute_threads.env>`: the slots each actor computes with."""
    spec = ctx.facts.compute_threads
    if spec is None:
        return
    entry, per_node = modes.mode(ctx.get("mode")), ctx.get("cluster.gpu_per_node")
    turns = spec.turns_share_node and takes_turns(ctx)
    inputs = (ctx.fact("compute_threads"), ctx.input("mode"), ctx.input("cluster.gpu_per_node"))
    if turns:
        inputs += tuple(ctx.input(f"synchronizer.{key}") for key in ("sync_style", "sync_interval", "sync_offset"))
    if entry.trains:
        ranks = ctx.get("cluster.trainer_gpu_num_per_node")
        alone = spec.turns_share_node and not entry.runs_engines  # the node's cores are the ranks' alone
        _set(ctx, "trainer", spec.env, per_node // ranks if (turns or alone) and ranks else 1, inputs)
    if entry.runs_engines:
        slots = min(devices_per_engine(ctx.get("explorer.rollout_model")), per_node)  # one actor per node it spans
        engines = max(1, min(ctx.get("cluster.rollout_gpu_num"), per_node) // slots)  # on one node
        _set(ctx, "rollout", spec.env, per_node // engines if turns else slots, inputs)


def takes_turns(ctx: Context) -> bool:
    """Whether rollout and training never compute at once: colocated, or every explore step waits for the weights of
    the train step before it (fixed sync every step, no offset)."""
    entry = modes.mode(ctx.get("mode"))
    if entry.shares_devices:
        return True
    sync = {key: ctx.get(f"synchronizer.{key}") for key in ("sync_style", "sync_interval", "sync_offset")}
    alternate = sync == {"sync_style": "fixed", "sync_interval": 1, "sync_offset": 0}
    return entry.explores and entry.trains and alternate


def _set(ctx: Context, role: str, var: str, threads: int, inputs: tuple[str, ...]) -> None:
    key = f"env.{role}.{var}"
    if not ctx.user_set(key) and not ctx.user_set(f"env.common.{var}"):  # a person's value wins wherever written
        ctx.set(key, str(threads), "compute_threads", inputs)
