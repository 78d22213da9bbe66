"""Rules for the explorer's runners (issue 48): dynamic_timeout, runner_state_report_interval, concurrent_mode,
over_rollout."""

import math

from .. import modes
from ._context import Context
from ._rule import rule

DYNAMIC = "explorer.dynamic_timeout"
RUNNER_STATE = "explorer.runner_state_report_interval"
CONCURRENT = "explorer.concurrent_mode"


@rule(reads=(f"{DYNAMIC}.enable", f"{DYNAMIC}.ratio", f"{DYNAMIC}.warmup_min_steps", RUNNER_STATE, CONCURRENT, "mode"))
def explorer_runners(ctx: Context) -> None:
    """The runners' keys (issue 48) where nothing reads them are noted: in a mode whose explorer runs no workflow
    (train, serve); the dynamic timeout also in mode bench (no explore step completes there, so max_timeout stays,
    as upstream's), and its ratio and warmup_min_steps while it is off."""
    mode, run = ctx.get("mode"), modes.mode(ctx.get("mode"))
    dynamic = [f"{DYNAMIC}.enable", f"{DYNAMIC}.ratio", f"{DYNAMIC}.warmup_min_steps"]
    written = [k for k in (RUNNER_STATE, CONCURRENT, *dynamic) if ctx.user_set(k)]
    if not run.explores:  # no explorer runs workflows (train, serve)
        for key in written:
            ctx.report(
                "note",
                key,
                f"changes nothing in mode {mode!r}: its explorer runs no workflow",
                hint=f"remove {key}",
            )
        return
    enabled = ctx.get(f"{DYNAMIC}.enable")
    if enabled and not run.explores_steps and ctx.user_set(f"{DYNAMIC}.enable"):
        ctx.report(
            "note",
            f"{DYNAMIC}.enable",
            f"changes nothing in mode {mode!r}: the timeout adapts once explore steps are done, and it runs none "
            "(explorer.max_timeout applies)",
            hint=f"remove {DYNAMIC}",
        )
    for key in dynamic[1:]:
        if not enabled and ctx.user_set(key):
            ctx.report(
                "note",
                key,
                f"changes nothing: {DYNAMIC}.enable is false (explorer.max_timeout applies)",
                hint=f"set {DYNAMIC}.enable=true, or remove {key}",
            )


OVER = "explorer.over_rollout"


@rule(
    reads=(
        f"{OVER}.ratio",
        f"{OVER}.wait_after_min",
        f"{OVER}.return_partial_tasks",
        "mode",
        "synchronizer.sync_style",
        "buffer.batch_size",
        "buffer.train_batch_size",
        "algorithm.repeat_times",
    )
)
def over_rollout(ctx: Context) -> None:
    """explorer.over_rollout leaves a training step's slowest tasks behind (runners.Quorum): under sync_style fixed,
    where explorer and trainer take turns, a step short of experiences would leave the trainer waiting for a batch
    only the next explore step makes, which waits for the trainer (Trinity-RFT's validator refuses it there too).
    Under another style a train batch larger than what a step's quorum writes is refused: the stage explores
    buffer.total_steps steps (upstream's explorer reads on until its taskset ends), so its last train steps would wait
    for experiences no step makes. Written where it changes nothing, a note: in a mode that runs no explore step, and
    its other keys with ratio 0."""
    mode, run = ctx.get("mode"), modes.mode(ctx.get("mode"))
    ratio, keys = ctx.get(f"{OVER}.ratio"), (f"{OVER}.wait_after_min", f"{OVER}.return_partial_tasks")
    if not run.explores_steps:
        for key in (f"{OVER}.ratio", *keys):
            if ctx.user_set(key):
                ctx.report(
                    "note", key, f"changes nothing in mode {mode!r}: it runs no explore step", hint=f"remove {key}"
                )
        return
    if ratio > 0 and run.trains and ctx.get("synchronizer.sync_style") == "fixed":
        ctx.report(
            "error",
            f"{OVER}.ratio",
            f"{ratio:g} leaves tasks of each explore step behind, and under sync_style 'fixed' the trainer would wait "
            "for a full batch that only the next explore step makes, which waits for the trainer",
            allowed="0 under sync_style fixed",
            hint="use synchronizer.sync_style trainer_driven, explorer_driven or fully_async (the explorer runs "
            "ahead), or set the ratio to 0",
        )
    elif ratio > 0 and run.trains:
        _quorum_fills_a_batch(ctx, ratio)
    for key in keys:
        if ratio == 0 and ctx.user_set(key):
            ctx.report(
                "note", key, f"changes nothing: {OVER}.ratio is 0 (every task is waited for)", hint=f"remove {key}"
            )


def _quorum_fills_a_batch(ctx: Context, ratio: float) -> None:
    """buffer.train_batch_size at most the experiences of the tasks an explore step waits for."""
    tasks, repeat = ctx.get("buffer.batch_size"), ctx.get("algorithm.repeat_times")
    quorum = math.ceil(tasks * (1 - ratio))
    least, batch = quorum * repeat, ctx.get("buffer.train_batch_size")
    if batch <= least:
        return
    ctx.report(
        "error",
        f"{OVER}.ratio",
        f"{ratio:g} leaves up to {tasks - quorum} of buffer.batch_size={tasks} tasks of each explore step behind: a "
        f"step may write {quorum} x algorithm.repeat_times={repeat} = {least} experiences, fewer than "
        f"buffer.train_batch_size={batch}; the stage explores buffer.total_steps steps, so its last train steps "
        "would wait for experiences no step makes",
        allowed=f"buffer.train_batch_size <= {least} with this ratio",
        hint=f"set buffer.train_batch_size={least}, or a smaller {OVER}.ratio",
    )
