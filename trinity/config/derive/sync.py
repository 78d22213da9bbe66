"""Rule for synchronizer.sync_method and the weight-sync world size."""

from .. import modes
from ..algorithms import needs_rollout
from ..schema.synchronizer import COLLECTIVE_METHODS
from ._context import Context

KEY = "synchronizer.sync_method"


def sync_method(ctx: Context) -> None:
    """online -> the hardware's collective; another vendor's collective is corrected; mode rules apply."""
    asked, backend, mode = ctx.get(KEY), ctx.facts.collective_backend, ctx.get("mode")
    inputs = (ctx.input(KEY), ctx.fact("collective_backend"), ctx.input("mode"))
    method = {"online": backend, "offline": "checkpoint"}.get(asked, asked)
    if method in COLLECTIVE_METHODS and method != backend:
        ctx.report(
            "warning",
            KEY,
            f"{asked!r} is not the collective backend of {ctx.loaded.name}, which is {backend!r} "
            f"({ctx.loaded.where(('facts', 'collective_backend'))}); using {backend!r}",
            allowed=f"{backend}, online, checkpoint, memory",
            hint="write sync_method: online to get the right collective on every hardware",
        )
        method = backend
    entry = modes.mode(mode)
    # a collective joins trainer and engines running side by side; taking turns on the devices, the weights go through
    # memory; across two runs (explore and train), through checkpoint files
    if method in COLLECTIVE_METHODS and not entry.splits_devices:
        method = "memory" if entry.shares_devices else "checkpoint"
        if needs_rollout(ctx.get("algorithm.algorithm_type")):  # SFT syncs nothing: no note about how it would
            ctx.report(
                "note",
                KEY,
                f"a collective sync needs explorer and trainer running side by side; in mode {mode!r} it becomes "
                f"{method!r}",
            )
    ctx.set(KEY, method, "sync_method", inputs)
    rollout = ctx.get("cluster.rollout_gpu_num")
    world = rollout + 1 if method in COLLECTIVE_METHODS and rollout is not None else None
    ctx.set(
        "synchronizer.weight_sync_world_size",
        world,
        "weight_sync_world_size",
        (ctx.input("cluster.rollout_gpu_num"), f"{KEY}={method!r}"),
    )


def eval_interval(ctx: Context) -> None:
    """explorer.eval_interval is rounded down to a multiple of sync_interval, so evaluation follows a sync (upstream's
    rule)."""
    every, sync = ctx.get("explorer.eval_interval"), ctx.get("synchronizer.sync_interval")
    # a mode that evaluates each saved checkpoint once has no evaluation interval
    if (
        modes.mode(ctx.get("mode")).evaluates_checkpoints
        or not needs_rollout(ctx.get("algorithm.algorithm_type"))
        or every % sync == 0
    ):
        return
    value = max(every // sync, 1) * sync
    ctx.report(
        "warning",
        "explorer.eval_interval",
        f"{every} is not a multiple of synchronizer.sync_interval={sync}; using {value}",
        allowed=f"a multiple of {sync}",
        hint=f"set explorer.eval_interval to a multiple of {sync}",
    )
    ctx.set(
        "explorer.eval_interval",
        value,
        "eval_interval",
        (ctx.input("explorer.eval_interval"), ctx.input("synchronizer.sync_interval")),
    )
