"""Checks before Ray starts: everything a run reads is on this machine and every role can be built.

Run in the driver in seconds, so a wrong path, an engine this version lacks, or a trainer value
verl refuses ends the run before ten minutes of start-up rather than after.
"""

import json
import os
import warnings
from pathlib import Path
from typing import Any

from ..errors import ConfigError, Issue
from ..config.local_inputs import data_issues, model_issues
from ..platforms import get_platform


MODES = ("both", "colocate", "explore", "train", "bench")  # what the stage runner drives


def check(resolved: Any) -> None:
    """Raise one ConfigError listing every problem found."""
    stages = [c for _, c in resolved.stages] or [resolved.config]
    issues = data_issues(resolved) + (model_issues(stages[0], resolved) or _remote_code_issues(stages[0], resolved))
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
            with warnings.catch_warnings():  # verl warns at import about every optional engine it lacks (torchtitan, megatron, ...)
                warnings.simplefilter("ignore", UserWarning)
                from .verl.config import build

                build(config, str(config.model.model_path), 1)


def _remote_code_issues(config: Any, resolved: Any) -> list[Issue]:
    """A model whose class only its own folder's code defines needs model.trust_remote_code; transformers
    would refuse it in every role after start-up."""
    meta = json.loads((Path(config.model.model_path) / "config.json").read_text())
    code = meta.get("auto_map", {}).get("AutoModelForCausalLM")
    if config.model.trust_remote_code or code is None:
        return []
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if meta.get("model_type") in CONFIG_MAPPING_NAMES:
        return []  # a model type transformers knows is loaded with transformers' own class
    return [
        Issue(
            f"{config.model.model_path!r} is a {meta.get('model_type')!r} model defined by its own code ({code}), which runs only with model.trust_remote_code",
            key="model.model_path",
            source=resolved.provenance.where(("model", "model_path")),
            hint="read the .py files in the model folder; if you trust them, set model.trust_remote_code: true",
        )
    ]


def _engine_issues(config: Any, resolved: Any) -> list[Issue]:
    from .rollout import ENGINES

    if config.mode == "train":
        return []
    issues = []
    kind = config.explorer.rollout_model.engine_type
    if kind not in ENGINES:
        where = resolved.provenance.where(("explorer", "rollout_model", "engine_type"))
        issues.append(Issue(f"engine type {kind!r} has no rollout engine in this version of trinity", key="explorer.rollout_model.engine_type", source=where, allowed=", ".join(ENGINES), hint="set explorer.rollout_model.engine_type=transformers (Hugging Face generate on any torch device)"))
    if kind == "vllm":
        issues += _vllm_issues(config, resolved)
    if config.explorer.auxiliary_models:
        where = resolved.provenance.where(("explorer", "auxiliary_models"))
        issues.append(Issue("auxiliary models are planned and placed, but no workflow of this version uses them", key="explorer.auxiliary_models", source=where, hint="remove explorer.auxiliary_models"))
    return issues


def _vllm_issues(config: Any, resolved: Any) -> list[Issue]:
    """vLLM (and the platform's plugin) installed here, an engine layout vLLM can run, and engine
    arguments the installed vLLM takes; vLLM's files are read, never imported, in the driver."""
    import importlib.util

    from .rollout import vllm_args, vllm_fields

    key, where = "explorer.rollout_model.engine_type", resolved.provenance.where(("explorer", "rollout_model", "engine_type"))
    platform = get_platform(config.hardware.device_type)
    missing = [m for m in platform.vllm_modules if importlib.util.find_spec(m) is None]
    if missing:
        hint = f"install the {platform.install_extra} extra on every node: pip install '.[{platform.install_extra}]' in trinity's checkout (README: versions that work together); or set {key}=transformers"
        return [Issue(f"engine type 'vllm' on {config.hardware.name} needs {', '.join(missing)}, which this Python cannot import", key=key, source=where, hint=hint)]
    problem = vllm_args.layout_problem(config)
    if problem:
        return [Issue(problem, key="explorer.rollout_model.data_parallel_size", source=where, hint="set data_parallel_size: 1 and raise engine_num instead")]
    fields = vllm_fields.installed()
    topo = vllm_args.topology(config, 0)
    kwargs = vllm_args.engine_kwargs(config, str(config.model.model_path), topo, ("127.0.0.1", 1) if topo.parts > 1 else None)
    refused = fields.problems(kwargs) if fields else []
    if refused:
        return [Issue(f"the installed vLLM does not take the engine arguments trinity builds: {'; '.join(refused)}", key=key, source=where, hint=f"install vllm=={vllm_fields.PINNED}, the version trinity is tested against")]
    return []
