"""What the loops do around the roles' work: a finished step's metrics line, progress, summary and due checkpoint;
a sync of the engines; an evaluation."""

from typing import TYPE_CHECKING

from ...launch.roles import ROLLOUT
from ..roles.protocols import EvalRecord, ExploreResult, TrainResult

PREVIEW_TABLE = "rollout_examples"  # Trinity-RFT's name of the preview table

if TYPE_CHECKING:
    from .stage import Stage


def explored(stage: "Stage", step: int, result: ExploreResult) -> None:
    """Record explore step `step` (stage-local)."""
    stage.metrics.write("explorer", stage.start.offset + step, stage.name, **_flat(result, ExploreResult))
    stage.summary.reward = result["reward_mean"]
    if not stage.mode.trains:
        stage.progress.update(step, reward=result["reward_mean"], tok_s=result["tokens_per_s"])
    else:
        stage.progress.fields.update(reward=f"{result['reward_mean']:.3g}", tok_s=f"{result['tokens_per_s']:.3g}")


def trained(stage: "Stage", step: int, result: TrainResult) -> None:
    """Record train step `step` (stage-local), and save a checkpoint when one is due (the last is the stage's own)."""
    # the NotRequired ones (logprob_diff, kl_penalty) only where the trainer computed them
    optional = TrainResult.__optional_keys__
    flat = ("loss_metrics", "advantage_metrics", "seqlen_metrics", "rollout_corr")  # written as their own keys
    named = [k for k in TrainResult.__annotations__ if k not in flat and (k in result or k not in optional)]
    values = {k: v for part in flat for k, v in result.get(part, {}).items()}
    values |= {k: result.get(k) for k in named}  # the protocol's names win
    # since the step before: this step's explore, train and sync calls (and any evaluation or checkpoint)
    values["driver_calls"], stage.counted_calls = stage.driver_calls - stage.counted_calls, stage.driver_calls
    rows = values.pop("preview", None)  # trainer.enable_preview: a table, not a number
    stage.metrics.write("trainer", stage.start.offset + step, stage.name, **values)
    if rows is not None:
        _preview(stage, step, rows)
    stage.progress.update(step, loss=result.get("loss"))
    every = stage.config.trainer.save_interval
    if every and step % every == 0 and (not stage.total or step < stage.total):  # 0: not known yet
        stage.checkpoint(step)


def _preview(stage: "Stage", step: int, rows: list[dict]) -> None:
    """Gather the steps' preview rows; every synchronizer.sync_interval steps (and at the stage's last) show them in
    the monitor as one table, as Trinity-RFT's trainer logs its rollout_examples."""
    stage.previews += rows
    if step % stage.config.synchronizer.sync_interval == 0 or step == stage.total:
        stage.metrics.table(PREVIEW_TABLE, stage.start.offset + step, stage.name, stage.previews)
        stage.previews = []


def sync(stage: "Stage", trained_steps: int) -> None:
    """Move the trainer's weights after stage step `trained_steps` to the engines, by the run's sync method."""
    # sharing devices: the engines' weights wake for the sync, the rest once it is done (device_handoff.py)
    stage.devices.to_sync(trained_steps)
    version = stage.start.offset + trained_steps
    result = stage.synchronizer.sync(version)
    stage.devices.give(ROLLOUT, trained_steps)
    method, seconds = result["method"], result["seconds"]
    stage.metrics.write("synchronizer", version, stage.name, method=method, seconds=seconds, weight_version=version)
    stage.progress.update(trained_steps, sync_s=seconds)


def evaluate(stage: "Stage", version: int) -> None:
    """Evaluate weight version `version` on the eval tasksets (none: nothing to do)."""
    if not stage.explorer or not stage.config.buffer.explorer_input.eval_tasksets:
        return
    stage.devices.give(ROLLOUT, version - stage.start.offset)
    records: list[EvalRecord] = stage.wait([stage.on_explorer("evaluate").remote(version)])[0]
    for record in records:
        stage.metrics.write("eval", version, stage.name, **_flat(record, EvalRecord))
        stage.summary.eval_first.setdefault(record["taskset"], record["accuracy"])
        stage.summary.eval_last[record["taskset"]] = record["accuracy"]


def _flat(result: ExploreResult | EvalRecord, kind: type) -> dict:
    """A role's result as its metrics line: the fields its protocol names (which win over a workflow metric of the
    same name), the workflows' own means beside them."""
    return result["workflow_metrics"] | {k: result[k] for k in kind.__annotations__ if k != "workflow_metrics"}
