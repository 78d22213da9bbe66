"""Checks before Ray starts: everything a run reads is on this machine and every role can be built.

Run in the driver in seconds, so a wrong path, an engine this version lacks, or a trainer value
verl refuses ends the run before ten minutes of start-up rather than after.
"""

import os
from typing import Any

from ..config.errors import ConfigError, Issue
from ..config.local_inputs import data_issues, model_issues
from ..platforms import get_platform


MODES = ("both", "colocate", "explore", "train", "bench")  # what the stage runner drives


def check(resolved: Any) -> None:
    """Raise one ConfigError listing every problem found."""
    stages = [c for _, c in resolved.stages] or [resolved.config]
    issues = data_issues(resolved) + model_issues(stages[0], resolved)
    for config in stages:
        if config.mode not in MODES:
            issues.append(Issue(f"mode {config.mode!r} is not run by this version of trinity", key="mode", source=resolved.provenance.where(("mode",)), allowed=", ".join(MODES)))
    for config in stages:
        issues += [i for i in _engine_issues(config, resolved) if i not in issues]
    if issues:
        raise ConfigError(issues)
    os.environ.update(get_platform(resolved.config.hardware.device_type).verl_env())  # before verl is imported here
    for config in stages:
        if config.mode != "explore" and config.mode != "bench":
            from .verl.config import build

            build(config, str(config.model.model_path), 1)


def _engine_issues(config: Any, resolved: Any) -> list[Issue]:
    from .rollout import ENGINES

    if config.mode == "train":
        return []
    issues = []
    kind = config.explorer.rollout_model.engine_type
    if kind not in ENGINES:
        where = resolved.provenance.where(("explorer", "rollout_model", "engine_type"))
        issues.append(Issue(f"engine type {kind!r} has no rollout engine in this version of trinity", key="explorer.rollout_model.engine_type", source=where, allowed=", ".join(ENGINES), hint="set explorer.rollout_model.engine_type=transformers (Hugging Face generate on any torch device)"))
    if config.explorer.auxiliary_models:
        where = resolved.provenance.where(("explorer", "auxiliary_models"))
        issues.append(Issue("auxiliary models are planned and placed, but no workflow of this version uses them", key="explorer.auxiliary_models", source=where, hint="remove explorer.auxiliary_models"))
    return issues
