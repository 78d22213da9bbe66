"""Rules for the explorer's runners (issue 48): dynamic_timeout, runner_state_report_interval, concurrent_mode."""

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
