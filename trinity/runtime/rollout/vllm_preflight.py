"""The vLLM engine's preflight check (its registry entry names it): vLLM and the platform's plugin installed,
a layout vLLM can run, and engine arguments the installed vLLM takes. vLLM's files are read, never imported,
in the driver."""

import importlib.util
from typing import Any

from ...config import engines
from ...config.resolve import ResolvedConfig
from ...config.schema import RunConfig
from ...errors import Issue
from ...platforms import get_platform
from ...platforms.versions import vllm_release
from . import vllm_args, vllm_fields

KEY = "explorer.rollout_model.engine_type"
EXTRA = "explorer.rollout_model.extra_engine_args"


def issues(configs: list, resolved: ResolvedConfig) -> list[Issue]:
    """Every problem of the stage configs that run vLLM; the installed vLLM's fields are read once."""
    fields = vllm_fields.installed()  # its source is parsed: once for every stage
    found = []
    for config in configs:
        found += _engine_issues(config, resolved, fields) + _extra_args_issues(config, resolved, fields)
    return found


def _engine_issues(config: RunConfig, resolved: ResolvedConfig, fields: Any) -> list[Issue]:
    """The first of: vLLM or its plugin missing, a layout vLLM cannot run, arguments it does not take."""
    where = resolved.provenance.where(("explorer", "rollout_model", "engine_type"))
    platform = get_platform(config.hardware.device_type)
    # the engine's own package, then what the platform adds (vllm-ascend's plugin on NPUs)
    needed = dict.fromkeys((engines.engine("vllm").needs, *platform.vllm_modules))
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        install = (
            platform.vllm_install
            or f"install the {platform.install_extra} extra on every node: pip install '.[{platform.install_extra}]' "
            "in trinity's checkout"
        )
        hint = f"{install} (docs/clusters.md: versions that work together); or set {KEY}=transformers"
        return [
            Issue(
                f"engine type 'vllm' on {config.hardware.name} needs {', '.join(missing)}, which this Python cannot "
                "import",
                key=KEY,
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
                key=KEY,
                source=where,
                hint=f"install vLLM {vllm_release(config.hardware.device_type)}, the version trinity runs on "
                f"{config.hardware.device_type}",
            )
        ]
    return []


def _extra_args_issues(config: RunConfig, resolved: ResolvedConfig, fields: Any) -> list[Issue]:
    """extra_engine_args: only names vLLM takes, with values of their types, and none that trinity sets."""
    extra = config.explorer.rollout_model.extra_engine_args
    if not extra:
        return []
    managed = set(
        vllm_args.own_kwargs(config, str(config.model.model_path), vllm_args.topology(config, 0), ("127.0.0.1", 1))
    ) | set(vllm_args.OPTIONAL_ARGS)
    # no vLLM here: the release this platform runs
    fields = fields or vllm_fields.for_device(config.hardware.device_type)
    found = []
    for name, value in extra.items():
        where = resolved.provenance.where(("explorer", "rollout_model", "extra_engine_args", name))
        if name in managed:
            found.append(
                Issue(
                    f"{name} is an engine argument trinity sets from the config",
                    key=f"{EXTRA}.{name}",
                    source=where,
                    hint="set it through trinity's own keys (explorer.rollout_model.*, model.*), which trinity "
                    "passes to vLLM",
                )
            )
        else:
            found += [
                Issue(
                    problem,
                    key=f"{EXTRA}.{name}",
                    source=where,
                    hint="see vLLM's EngineArgs for the names and types it takes",
                )
                for problem in fields.problems({name: value})
            ]
    return found
