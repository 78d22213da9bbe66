"""Checks before Ray starts: everything a run reads is on this machine and every role can be built.

Run in the driver in seconds, so a wrong path, an engine this version lacks, or a trainer value
verl refuses ends the run before ten minutes of start-up rather than after.
"""

import json
import os
import warnings
from pathlib import Path
from typing import Any

from ..config.derive.cluster import TRAINERLESS_MODES
from ..config.local_inputs import data_issues, model_issues
from ..config.provenance import WRITTEN
from ..errors import ConfigError, Issue
from ..platforms import get_platform
from ..platforms.versions import vllm_release

MODES = ("both", "colocate", "explore", "train", "bench")  # what the stage runner drives


def check(resolved: Any) -> None:
    """Raise one ConfigError listing every problem found."""
    stages = [c for _, c in resolved.stages] or [resolved.config]
    issues = data_issues(resolved) + (model_issues(stages[0], resolved) or _remote_code_issues(stages, resolved))
    for config in stages:
        if config.mode not in MODES:
            issues.append(
                Issue(
                    f"mode {config.mode!r} is not run by this version of trinity",
                    key="mode",
                    source=resolved.provenance.where(("mode",)),
                    allowed=", ".join(MODES),
                )
            )
    fields = _installed_vllm(stages)
    for config in stages:
        issues += [i for i in _engine_issues(config, resolved, fields) if i not in issues]
    for config, provenance in zip(stages, resolved.stage_provenance or [resolved.provenance]):
        issues += [i for i in _attention_issues(config, resolved, provenance) if i not in issues]
    if issues:
        raise ConfigError(issues)
    os.environ.update(get_platform(resolved.config.hardware.device_type).verl_env())  # before verl is imported here
    for config in stages:
        if config.mode not in TRAINERLESS_MODES:
            # verl warns at import about every optional engine it lacks (torchtitan, megatron, ...)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                from .verl.config import build

                build(config, str(config.model.model_path), 1)


def _remote_code_issues(stages: list, resolved: Any) -> list[Issue]:
    """A model or tokenizer whose class only its own folder's code defines needs model.trust_remote_code in
    every stage; transformers would refuse it in every role after start-up."""
    untrusted = [i for i, config in enumerate(stages) if not config.model.trust_remote_code]
    if not untrusted:
        return []
    trust = (
        "model.trust_remote_code"
        if len(untrusted) == len(stages)
        else " and ".join(f"stages.{i}.model.trust_remote_code" for i in untrusted)
    )
    folder = Path(stages[0].model.model_path)  # a later stage starts from a checkpoint of it, which carries its code
    where = resolved.provenance.where(("model", "model_path"))
    issues = []
    for what, file, auto, known in (
        ("model", "config.json", "AutoModelForCausalLM", _known_model),
        ("tokenizer", "tokenizer_config.json", "AutoTokenizer", _known_tokenizer),
    ):
        meta, problem = _read_json(folder / file)
        code = (meta.get("auto_map") or {}).get(auto)
        if problem:
            issues.append(
                Issue(
                    problem,
                    key="model.model_path",
                    source=where,
                    hint=f"fix or replace {file}; transformers reads it in every role",
                )
            )
        elif code and not known(meta):
            shown = code if isinstance(code, str) else next(c for c in code if c)
            message = f"{str(folder)!r} has a {what} defined by its own code ({shown}), which runs only with {trust}"
            issues.append(
                Issue(
                    message,
                    key="model.model_path",
                    source=where,
                    hint=f"read the .py files in the model folder; if you trust them, set {trust}: true",
                )
            )
    return issues


def _read_json(path: Path) -> tuple[dict, str]:
    """(the file's object, '') or ({}, what is wrong); a missing optional file is an empty object."""
    if not path.is_file():
        return {}, ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {}, f"{path} is not readable JSON: {exc}"
    return (data, "") if isinstance(data, dict) else ({}, f"{path} holds {type(data).__name__}, not a JSON object")


def _known_model(meta: dict) -> bool:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return meta.get("model_type") in CONFIG_MAPPING_NAMES  # transformers loads its own class for a type it knows


def _known_tokenizer(meta: dict) -> bool:
    import transformers

    return bool(meta.get("tokenizer_class")) and hasattr(transformers, meta["tokenizer_class"])


def _installed_vllm(stages: list) -> Any:
    """The installed vLLM's EngineArgs fields, read once (its source is parsed) when a stage runs vLLM; else None."""
    if all(c.explorer.rollout_model.engine_type != "vllm" for c in stages):
        return None
    from .rollout import vllm_fields

    return vllm_fields.installed()


def _engine_issues(config: Any, resolved: Any, fields: Any) -> list[Issue]:
    from .rollout import ENGINES

    if config.mode == "train":
        return []
    issues = []
    kind = config.explorer.rollout_model.engine_type
    if kind not in ENGINES:
        where = resolved.provenance.where(("explorer", "rollout_model", "engine_type"))
        issues.append(
            Issue(
                f"engine type {kind!r} has no rollout engine in this version of trinity",
                key="explorer.rollout_model.engine_type",
                source=where,
                allowed=", ".join(ENGINES),
                hint="set explorer.rollout_model.engine_type=transformers (Hugging Face generate on any torch device)",
            )
        )
    if kind == "vllm":
        issues += _vllm_issues(config, resolved, fields)
    issues += _extra_args_issues(config, resolved, fields)
    return issues


def _attention_issues(config: Any, resolved: Any, provenance: Any) -> list[Issue]:
    """The trainer's attention kernel must be importable where the platform needs a package for it
    (flash_attention_2 on GPUs: transformers raises at model init otherwise); found, never imported."""
    import importlib.util

    kernel, path = config.trainer.attn_implementation, ("trainer", "attn_implementation")
    needed = get_platform(config.hardware.device_type).attn_modules.get(kernel)
    if config.mode in TRAINERLESS_MODES or needed is None or importlib.util.find_spec(needed[0]) is not None:
        return []
    if provenance.set_by(path, *WRITTEN):
        source, came = provenance.written_where(path), "set in the config"
    else:
        source, came = (
            resolved.profile.where(("facts", "attn_implementation")),
            f"the {config.hardware.name} profile's attn_implementation",
        )
    message = (
        f"{kernel!r} ({came}) needs the {needed[0]} package, which this Python cannot import: the trainer "
        "would fail at model init"
    )
    return [
        Issue(
            message,
            key="trainer.attn_implementation",
            source=source,
            allowed="sdpa, eager, or an installed kernel",
            hint=f"{needed[1]} on every node, or set trainer.attn_implementation: sdpa",
        )
    ]


def _extra_args_issues(config: Any, resolved: Any, fields: Any) -> list[Issue]:
    """extra_engine_args are vLLM's: only names vLLM takes, with values of their types, and none that trinity sets."""
    extra = config.explorer.rollout_model.extra_engine_args
    if not extra:
        return []
    key = "explorer.rollout_model.extra_engine_args"
    if config.explorer.rollout_model.engine_type != "vllm":
        where = resolved.provenance.where(("explorer", "rollout_model", "extra_engine_args"))
        return [
            Issue(
                f"vLLM engine arguments, but the engine is {config.explorer.rollout_model.engine_type!r}",
                key=key,
                source=where,
                hint="remove them, or set explorer.rollout_model.engine_type: vllm",
            )
        ]
    from .rollout import vllm_args, vllm_fields

    managed = set(
        vllm_args.own_kwargs(config, str(config.model.model_path), vllm_args.topology(config, 0), ("127.0.0.1", 1))
    ) | set(vllm_args.OPTIONAL_ARGS)
    # no vLLM here: the release this platform runs
    fields = fields or vllm_fields.for_device(config.hardware.device_type)
    issues = []
    for name, value in extra.items():
        where = resolved.provenance.where(("explorer", "rollout_model", "extra_engine_args", name))
        if name in managed:
            issues.append(
                Issue(
                    f"{name} is an engine argument trinity sets from the config",
                    key=f"{key}.{name}",
                    source=where,
                    hint="set it through trinity's own keys (explorer.rollout_model.*, model.*), which trinity "
                    "passes to vLLM",
                )
            )
        else:
            issues += [
                Issue(
                    problem,
                    key=f"{key}.{name}",
                    source=where,
                    hint="see vLLM's EngineArgs for the names and types it takes",
                )
                for problem in fields.problems({name: value})
            ]
    return issues


def _vllm_issues(config: Any, resolved: Any, fields: Any) -> list[Issue]:
    """vLLM (and the platform's plugin) installed here, an engine layout vLLM can run, and engine
    arguments the installed vLLM takes; vLLM's files are read, never imported, in the driver."""
    import importlib.util

    from .rollout import vllm_args

    key, where = (
        "explorer.rollout_model.engine_type",
        resolved.provenance.where(("explorer", "rollout_model", "engine_type")),
    )
    platform = get_platform(config.hardware.device_type)
    missing = [m for m in platform.vllm_modules if importlib.util.find_spec(m) is None]
    if missing:
        install = (
            platform.vllm_install
            or f"install the {platform.install_extra} extra on every node: pip install '.[{platform.install_extra}]' "
            "in trinity's checkout"
        )
        hint = f"{install} (README: versions that work together); or set {key}=transformers"
        return [
            Issue(
                f"engine type 'vllm' on {config.hardware.name} needs {', '.join(missing)}, which this Python cannot "
                "import",
                key=key,
                source=where,
                hint=hint,
            )
        ]
    problem = vllm_args.layout_problem(config)
    if problem:
        return [
            Issue(
                problem,
                key="explorer.rollout_model.data_parallel_size",
                source=where,
                hint="set data_parallel_size: 1 and raise engine_num instead",
            )
        ]
    topo = vllm_args.topology(config, 0)
    # the extras are _extra_args_issues'
    kwargs = vllm_args.own_kwargs(
        config, str(config.model.model_path), topo, ("127.0.0.1", 1) if topo.parts > 1 else None
    )
    refused = fields.problems(kwargs) if fields else []
    if refused:
        return [
            Issue(
                f"the installed vLLM does not take the engine arguments trinity builds: {'; '.join(refused)}",
                key=key,
                source=where,
                hint=f"install vLLM {vllm_release(config.hardware.device_type)}, the version trinity runs on "
                f"{config.hardware.device_type}",
            )
        ]
    return []
