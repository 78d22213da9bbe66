"""Rule for synchronizer.sync_method and the weight-sync world size."""

from ..algorithms import ALGORITHMS
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
    if method in COLLECTIVE_METHODS and mode != "both":
        method = "memory" if mode == "colocate" else "checkpoint"
        preset = ALGORITHMS.get(ctx.get("algorithm.algorithm_type"))
        if preset is None or preset.needs_rollout:  # SFT syncs nothing: no note about how it would
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
    preset = ALGORITHMS.get(ctx.get("algorithm.algorithm_type"))
    if ctx.get("mode") == "bench" or (preset is not None and not preset.needs_rollout) or every % sync == 0:
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
