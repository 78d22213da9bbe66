"""Rule that fills the algorithm's loss functions from its preset and checks each function's arguments."""

from ..algorithms import ALGORITHMS, FUNCTIONS, NoArgs
from ..errors import ConfigError, did_you_mean, dotted
from ..validate import validate
from ._context import Context

KEY = "algorithm.algorithm_type"


def algorithm_preset(ctx: Context) -> None:
    """Unset functions come from the algorithm_type's preset; every function's args are validated and completed."""
    name = ctx.get(KEY)
    preset = ALGORITHMS.get(name)
    if preset is None:
        hint = did_you_mean(name, ALGORITHMS) or "choose one of the allowed algorithms"
        ctx.report("error", KEY, f"unknown algorithm {name!r}", allowed=", ".join(ALGORITHMS), hint=hint)
        return
    if preset.unsupported:
        supported = ", ".join(n for n, p in ALGORITHMS.items() if not p.unsupported)
        ctx.report("error", KEY, f"{name!r} cannot run yet: {preset.unsupported}", allowed=supported, hint="use algorithm_type: grpo for RL without a critic")
        return
    for kind, default in preset.functions.items():
        _function(ctx, kind, default)
    if ctx.get("algorithm.loss_agg_mode") is None:
        ctx.set("algorithm.loss_agg_mode", preset.loss_agg_mode, "algorithm_preset", (ctx.input(KEY),))
    _check_groups(ctx)
    _check_mode(ctx, name, preset.needs_rollout)


def _function(ctx: Context, kind: str, default: str) -> None:
    key = f"algorithm.{kind}"
    if ctx.get(key) is None:
        ctx.set(key, default, "algorithm_preset", (ctx.input(KEY),))
    name, known = ctx.get(key), FUNCTIONS[kind]
    if name not in known:
        ctx.report("error", key, f"unknown {kind} {name!r}", allowed=", ".join(known), hint=did_you_mean(name, known) or f"remove {key} to take the preset's")
        return
    args_key = f"{key}_args"
    if known[name] is NoArgs and ctx.get(args_key):
        ctx.report("error", args_key, f"{kind} {name!r} takes no arguments", allowed="{}", hint=f"remove {args_key}")
        return
    try:
        args = validate(known[name], ctx.get(args_key) or {}, lambda path: ctx.where(dotted(path)), prefix=("algorithm", f"{kind}_args"))
    except ConfigError as exc:
        ctx.issues.extend(exc.issues)
        return
    ctx.set(args_key, args.model_dump(), "algorithm_preset", (ctx.input(key),))


def _check_groups(ctx: Context) -> None:
    if ctx.get("algorithm.advantage_fn") == "grpo" and ctx.get("algorithm.repeat_times") < 2:
        ctx.report(
            "warning",
            "algorithm.repeat_times",
            "GRPO compares the rollouts of one task with each other; with 1 per task every advantage is 0 and nothing is learned",
            allowed=">= 2",
            hint="set algorithm.repeat_times to 4 or more",
        )


def _check_mode(ctx: Context, name: str, needs_rollout: bool) -> None:
    if not needs_rollout and ctx.get("mode") not in ("train",):
        ctx.report("error", "mode", f"algorithm {name!r} trains on a data set and generates nothing; mode {ctx.get('mode')!r} would start rollout engines for nothing", allowed="train", hint="set mode: train (or a stage with mode: train)")
