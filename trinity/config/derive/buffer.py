"""Rules for the data path: each taskset's workflow and repeat count, and the trainer's batch size."""

from ..workflows import WORKFLOWS, workflow_path
from ..errors import did_you_mean
from ._context import Context
from .cluster import EXPLORING_MODES

INPUT = "buffer.explorer_input"


def tasksets(ctx: Context) -> list[tuple[str, dict, bool]]:
    """(key, taskset, is_eval) of every taskset the explorer reads."""
    found = [(f"{INPUT}.taskset", ctx.get(f"{INPUT}.taskset"), False)] if ctx.get(f"{INPUT}.taskset") else []
    found += [(f"{INPUT}.tasksets.{i}", t, False) for i, t in enumerate(ctx.get(f"{INPUT}.tasksets"))]
    return found + [(f"{INPUT}.eval_tasksets.{i}", t, True) for i, t in enumerate(ctx.get(f"{INPUT}.eval_tasksets"))]


def taskset_workflows(ctx: Context) -> None:
    """Each taskset's workflow (its own, else the input's default) must be known when the run explores."""
    if ctx.get("mode") not in EXPLORING_MODES:
        return
    fallback, reported = ctx.get(f"{INPUT}.default_workflow_type"), set()
    for key, taskset, _ in tasksets(ctx):
        name = taskset.get("default_workflow_type") or fallback
        if name is None:
            ctx.report("error", f"{key}.default_workflow_type", "no workflow for this taskset", allowed=", ".join(WORKFLOWS) + ", or module:Class", hint=f"set {INPUT}.default_workflow_type")
        elif not workflow_path(name):
            hint = did_you_mean(name, WORKFLOWS) or "name a built-in workflow, or your own class as module:Class"
            where = f"{key}.default_workflow_type" if taskset.get("default_workflow_type") else f"{INPUT}.default_workflow_type"
            if where in reported:
                continue  # several tasksets falling back to one bad default: one error
            reported.add(where)
            ctx.report("error", where, f"unknown workflow {name!r}", allowed=", ".join(WORKFLOWS) + ", or module:Class", hint=hint)


def taskset_repeat_times(ctx: Context) -> None:
    """Training tasksets roll out algorithm.repeat_times per task unless told; evaluation once (upstream's rule)."""
    for key, taskset, is_eval in tasksets(ctx):
        if taskset.get("repeat_times") is None:
            value, inputs = (1, ("evaluation taskset",)) if is_eval else (ctx.get("algorithm.repeat_times"), (ctx.input("algorithm.repeat_times"),))
            ctx.set(f"{key}.repeat_times", value, "taskset_repeat_times", inputs)


def train_batch_size(ctx: Context) -> None:
    """buffer.train_batch_size (experiences per train step) = batch_size x repeat_times when left at 0."""
    if ctx.get("buffer.train_batch_size") == 0:
        value = ctx.get("buffer.batch_size") * ctx.get("algorithm.repeat_times")
        ctx.set("buffer.train_batch_size", value, "train_batch_size", (ctx.input("buffer.batch_size"), ctx.input("algorithm.repeat_times")))
