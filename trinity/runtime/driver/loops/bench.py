"""Evaluate every complete checkpoint of the run directory, one after another (mode bench), or with
explorer.bench_on_latest_checkpoint the latest only (Trinity-RFT's Explorer.benchmark); the model itself when there is
none."""

import sys
from typing import TYPE_CHECKING

from ....errors import ConfigError, Issue
from ...weights import lora
from .. import step_results

if TYPE_CHECKING:
    from ..stage import Stage


def run(stage: "Stage") -> None:
    if stage.config.model.external_model.enable:  # the API's model: no weights of this run to load into it
        _external(stage)
        return
    saved = stage.run_dir.complete_checkpoints()
    refused = [f"{c.path.name}: {why}" for c in saved if (why := lora.mismatch(c.path, stage.config))]
    if refused:
        message = f"bench cannot evaluate {len(refused)} checkpoint(s) of this run: {'; '.join(refused)}"
        hint = "bench with the model.lora_configs and synchronizer.lora_sync the run trained with"
        raise ConfigError([Issue(message, key="synchronizer.lora_sync", source="the run config", hint=hint)])
    files = [(c, lora.engine_file(c.path, stage.config)) for c in saved]
    checkpoints = [(c, f) for c, f in files if f is not None]
    if stage.config.explorer.bench_on_latest_checkpoint:  # the highest step's only
        checkpoints = checkpoints[-1:]
    if not checkpoints:
        step_results.evaluate(stage, 0)
    for done, (checkpoint, file) in enumerate(checkpoints, 1):
        stage.wait([e.load_weights.remote(str(file), checkpoint.global_step) for e in stage.engines])
        step_results.evaluate(stage, checkpoint.global_step)
        stage.progress.update(done)


def _external(stage: "Stage") -> None:
    """An external (API) model is evaluated once, as it is (weight version 0): a checkpoint of the run directory
    cannot be sent to it, and is said to be left out."""
    saved = stage.run_dir.complete_checkpoints()
    if saved:
        steps = ", ".join(str(c.global_step) for c in saved)
        print(
            f"warning: bench evaluates the external model {stage.config.model.external_model.model_name!r} as its API "
            f"serves it; this run directory's {len(saved)} checkpoint(s) (steps {steps}) are not evaluated: an API "
            "model takes no weights",
            file=sys.stderr,
        )
    step_results.evaluate(stage, 0)
