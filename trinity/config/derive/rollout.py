"""Rules for what the rollout engines may ask of the hardware: auxiliary engines, sleep mode, KV cache size; and
serve mode's proxy in front of them."""

from .. import engines, modes
from ..schema.explorer import NO_API_KEY
from ..workflows import AUXILIARY_CLIENTS, OPENAI_CLIENTS
from ._context import Context
from ._rule import each_taskset, rule
from .buffer import EXPERIENCES, tasksets

ROLLOUT = "explorer.rollout_model"
MAX_PORT = 65535
AUTO_TOOLS = f"{ROLLOUT}.enable_auto_tool_choice"
# the endpoint's own settings, with the value that asks nothing of it: refused while no endpoint is served
ENDPOINT_SETTINGS = (
    ("base_port", None),
    ("api_key", NO_API_KEY),
    ("tool_call_parser", None),
    ("reasoning_parser", None),
    ("enable_auto_tool_choice", False),
)


AUX = "explorer.auxiliary_models"
# what an auxiliary model's engines take from the rollout engines where they set none: the hardware profile recommends
# these for the rollout model (conf/profiles: the CPU's transformers engine in float32, eager), and an auxiliary model
# runs on the same chips (Trinity-RFT runs every auxiliary model on vLLM, its only engine)
FROM_ROLLOUT = ("engine_type", "dtype", "enforce_eager")


def auxiliary_keys(*fields: str) -> tuple[str, ...]:
    """The keys `fields` of every auxiliary model (for a rule's reads and writes)."""
    return tuple(f"{AUX}.*.{name}" for name in fields)


def auxiliary_count(ctx: Context) -> int:
    return len(ctx.get(AUX) or [])


@rule(
    reads=(
        *(f"{ROLLOUT}.{name}" for name in FROM_ROLLOUT),
        *auxiliary_keys(*FROM_ROLLOUT, "model_path", "enable_openai_api", "external_model_config"),
    ),
    writes=auxiliary_keys("engine_type", "dtype", "enforce_eager", "enable_openai_api"),
)
def auxiliary_engines(ctx: Context) -> None:
    """Each auxiliary model (Trinity-RFT's explorer.auxiliary_models: a judge, a reward model, a teacher) runs engines
    of its own, served on their OpenAI endpoint for the workflows (upstream forces enable_openai_api): it names its
    model (upstream requires model_path), and takes the rollout engines' type, dtype and eager mode where it sets
    none."""
    for i in range(auxiliary_count(ctx)):
        key = f"{AUX}[{i}]"
        if not ctx.get(f"{key}.model_path"):
            ctx.report(
                "error",
                key,
                "an auxiliary model names the model its engines serve (Trinity-RFT: \"auxiliary model's model_path is "
                'required"); it does not default to model.model_path',
                allowed="a model folder (with its config.json) or a hub id (org/name)",
                hint=f"set {key}.model_path",
            )
        written = ctx.get(f"{key}.engine_type")
        if ctx.user_set(f"{key}.engine_type") and written in engines.ALIASES:
            name, why = engines.ALIASES[written]
            ctx.report("note", f"{key}.engine_type", f"{written!r} is {why}: engine {name!r}", hint=f"write {name}")
            ctx.set(f"{key}.engine_type", name, "auxiliary_engines", (ctx.input(f"{key}.engine_type"),))
        for name in FROM_ROLLOUT:
            if not ctx.user_set(f"{key}.{name}") and ctx.get(f"{key}.{name}") != ctx.get(f"{ROLLOUT}.{name}"):
                value = ctx.get(f"{ROLLOUT}.{name}")
                ctx.set(f"{key}.{name}", value, "auxiliary_engines", (ctx.input(f"{ROLLOUT}.{name}"),))
        if ctx.user_set(f"{key}.enable_openai_api") and not ctx.get(f"{key}.enable_openai_api"):
            ctx.report(
                "error",
                f"{key}.enable_openai_api",
                "workflows reach an auxiliary model through its engines' OpenAI endpoint (self.auxiliary_models: an "
                "OpenAI client each), so it is always served (as Trinity-RFT's)",
                allowed="true",
                hint=f"remove {key}.enable_openai_api",
            )
        elif not ctx.get(f"{key}.enable_openai_api"):
            ctx.set(f"{key}.enable_openai_api", True, "auxiliary_engines", (f"{key} (an auxiliary model)",))
        if (ctx.get(f"{key}.external_model_config") or {}).get("enable"):
            ctx.report(
                "error",
                f"{key}.external_model_config.enable",
                "an auxiliary model behind an outside API is not supported yet: its engines run in the run",
                allowed="false",
                hint=f"remove {key}.external_model_config, and name the model in {key}.model_path",
            )


@rule(reads=("mode", "explorer.auxiliary_models.*.engine_num"))  # how many there are
def auxiliary_models(ctx: Context) -> None:
    """Auxiliary models' engines need devices of their own: where the trainer and the rollout engines take turns on
    every device (colocate), there are none (Trinity-RFT starts no auxiliary engine in colocate mode, and its workflows
    then fail on the missing client): refused. In a mode without engines they are not started."""
    count, mode = auxiliary_count(ctx), ctx.get("mode")
    if count and modes.mode(mode).shares_devices:
        splitting = next(n for n, m in modes.MODES.items() if m.splits_devices)
        ctx.report(
            "error",
            AUX,
            f"mode {mode!r} has the trainer and the rollout engines take turns on every device, and leaves none for "
            f"the {count} auxiliary model(s)' engines, which run beside them for the whole run",
            allowed="[] (none)",
            hint=f"set mode={splitting} on more devices (the auxiliary engines count with the rollout engines'), or "
            f"remove {AUX}",
        )


@rule(reads=("mode", "explorer.auxiliary_models.*.engine_num", *each_taskset("default_workflow_type")))
def auxiliary_judges(ctx: Context) -> None:
    """A built-in workflow that asks a judge (the first auxiliary model: upstream's math_ruler_workflow) needs one."""
    if not modes.mode(ctx.get("mode")).explores or auxiliary_count(ctx):
        return
    for key, taskset, _ in tasksets(ctx):
        workflow = taskset.get("default_workflow_type")
        if workflow in AUXILIARY_CLIENTS:
            ctx.report(
                "error",
                f"{key}.default_workflow_type",
                f"{workflow} scores each task's answers with its judge, the first auxiliary model, and there is none",
                allowed="a workflow that scores by itself, or explorer.auxiliary_models with the judge",
                hint="add the judge: explorer.auxiliary_models: [{model_path: JUDGE_MODEL}]",
            )


@rule(reads=(AUTO_TOOLS, f"{ROLLOUT}.tool_call_parser"), writes=(AUTO_TOOLS,))
def auto_tool_choice(ctx: Context) -> None:
    """vLLM parses a reply's tool calls for tool_choice auto only with --enable-auto-tool-choice and a
    --tool-call-parser, and refuses to start with the first alone; trinity's endpoint takes the parser as asking for
    auto tool choice unless the config says false."""
    parser = ctx.get(f"{ROLLOUT}.tool_call_parser")
    if ctx.get(AUTO_TOOLS) and parser is None:
        ctx.report(
            "error",
            AUTO_TOOLS,
            "auto tool choice needs a tool-call format to read calls from replies (vLLM refuses to start with "
            "--enable-auto-tool-choice and no --tool-call-parser)",
            allowed="false",
            hint=f"set {ROLLOUT}.tool_call_parser (hermes, brackets), or remove {AUTO_TOOLS}",
        )
    elif parser is not None and not ctx.user_set(AUTO_TOOLS):
        ctx.set(AUTO_TOOLS, True, "auto_tool_choice", (ctx.input(f"{ROLLOUT}.tool_call_parser"),))


@rule(
    reads=(
        "buffer.trainer_input.experience_buffer.storage_type",
        "explorer.rollout_model.api_key",
        "explorer.rollout_model.base_port",
        "explorer.rollout_model.enable_auto_tool_choice",
        "explorer.rollout_model.enable_openai_api",
        "explorer.rollout_model.engine_num",
        "explorer.rollout_model.reasoning_parser",
        "explorer.rollout_model.tool_call_parser",
        "mode",
        *each_taskset("default_workflow_type"),
    ),
    writes=("explorer.rollout_model.enable_openai_api",),
)
def openai_api(ctx: Context) -> None:
    """Serve mode and a built-in agent workflow need the endpoint; the endpoint's settings are refused while none is
    served (nothing would read them)."""
    if modes.mode(ctx.get("mode")).serves and not _serving(ctx):
        return  # refused: one error, not its consequences
    served, agent = ctx.get(f"{ROLLOUT}.enable_openai_api"), _first_agent(ctx)
    if not served:
        _settings_unread(ctx)
    if agent and not served:
        ctx.report(
            "error",
            f"{ROLLOUT}.enable_openai_api",
            f"{agent[0]} runs {agent[1]}, whose agent calls the engines' OpenAI endpoint, and no endpoint is served",
            allowed="true",
            hint=f"set {ROLLOUT}.enable_openai_api: true (and tool_call_parser, for its tool calls)",
        )
    elif agent and ctx.get(f"{ROLLOUT}.tool_call_parser") is None:
        ctx.report(
            "error",
            f"{ROLLOUT}.tool_call_parser",
            f"{agent[0]} runs {agent[1]}, whose agent offers tools, and the endpoint reads no tool calls (it refuses "
            "requests with tools)",
            allowed="hermes, brackets",
            hint=f"set {ROLLOUT}.tool_call_parser to the format the model's chat template teaches",
        )
    elif agent and not ctx.get(AUTO_TOOLS):
        ctx.report(
            "error",
            AUTO_TOOLS,
            f"{agent[0]} runs {agent[1]}, whose agent asks for tool calls (tool_choice auto), which the endpoint "
            "refuses without auto tool choice",
            allowed="true",
            hint=f"remove {AUTO_TOOLS}: false",
        )
    base, engines = ctx.get(f"{ROLLOUT}.base_port"), ctx.get(f"{ROLLOUT}.engine_num")
    if served and base is not None and base + engines - 1 > MAX_PORT:
        ctx.report(
            "error",
            f"{ROLLOUT}.base_port",
            f"engine i listens on base_port + i: {engines} engines from {base} pass port {MAX_PORT}",
            allowed=f"at most {MAX_PORT - engines + 1}",
            hint=f"lower {ROLLOUT}.base_port, or unset it for a free port each",
        )


def _first_agent(ctx: Context) -> tuple[str, str] | None:
    """(key, workflow) of the first taskset an explorer runs with a built-in workflow that calls the endpoint."""
    if not modes.mode(ctx.get("mode")).explores:
        return None
    found = ((k, t.get("default_workflow_type")) for k, t, _ in tasksets(ctx))
    return next(((k, w) for k, w in found if w in OPENAI_CLIENTS), None)


def _settings_unread(ctx: Context) -> None:
    for name, default in ENDPOINT_SETTINGS:
        if ctx.user_set(f"{ROLLOUT}.{name}") and ctx.get(f"{ROLLOUT}.{name}") != default:
            ctx.report(
                "error",
                f"{ROLLOUT}.{name}",
                f"{name} configures the engines' OpenAI endpoint, which is not served",
                allowed="unset",
                hint=f"set {ROLLOUT}.enable_openai_api: true, or remove {name}",
            )


def _serving(ctx: Context) -> bool:
    """Serve mode serves the endpoint, and writes what it is told to a storage a later `train` run reads; False when
    the endpoint is refused."""
    key, storage = f"{ROLLOUT}.enable_openai_api", f"{EXPERIENCES}.storage_type"
    if ctx.user_set(key) and not ctx.get(key):
        ctx.report(
            "error",
            key,
            "mode 'serve' serves the rollout engines on their OpenAI endpoints",
            allowed="true",
            hint=f"remove {key}: false, or run another mode",
        )
        return False
    if not ctx.get(key):
        ctx.set(key, True, "openai_api", (ctx.input("mode"),))
    if ctx.get(storage) == "queue":
        ctx.report(
            "error",
            storage,
            "mode 'serve' writes its experiences for a `train` run of this directory, and a queue ends with this run",
            allowed="sql, file",
            hint=f"set {storage}: sql",
        )
    return True


@rule(reads=("explorer.rollout_model.engine_type", "mode"))
def sleep_mode(ctx: Context) -> None:
    """A mode sharing devices needs an engine that sleeps here (it frees the devices while the trainer steps)."""
    mode, kind = ctx.get("mode"), ctx.get(f"{ROLLOUT}.engine_type")
    if not modes.mode(mode).shares_devices or _sleeps_here(ctx, kind):
        return
    entry = engines.engine(kind)
    allowed = [e for e in ctx.facts.rollout_engines if _sleeps_here(ctx, e)]
    splitting = next(n for n, m in modes.MODES.items() if m.splits_devices)
    hint = f"set {ROLLOUT}.engine_type={allowed[0]}, or mode={splitting}" if allowed else f"set mode={splitting}"
    if not entry.sleeps:
        message = f"mode {mode!r} needs an engine that sleeps while the trainer steps; {kind!r} never sleeps"
    else:
        reason = ctx.facts.reasons.get("rollout_sleep_mode", "the hardware profile says it is missing")
        message = (
            f"mode {mode!r} with engine type {kind!r} needs {entry.label}'s sleep mode, which {ctx.loaded.name} "
            f"lacks ({ctx.fact('rollout_sleep_mode')}): {reason}"
        )
    ctx.report("error", f"{ROLLOUT}.engine_type", message, allowed=", ".join(allowed) or "none", hint=hint)


def _sleeps_here(ctx: Context, kind: str) -> bool:
    """Whether an engine of this type can free its devices on this hardware."""
    entry = engines.engine(kind)
    return entry.sleeps and (ctx.facts.rollout_sleep_mode or not entry.sleep_is_hardware_fact)


def _models(ctx: Context) -> list[str]:
    """The key of every model the run's engines serve: the rollout model's, then each auxiliary model's."""
    return [ROLLOUT] + [f"{AUX}[{i}]" for i in range(auxiliary_count(ctx))]


@rule(
    reads=(
        "explorer.rollout_model.engine_type",
        "explorer.rollout_model.kv_cache_mib",
        *auxiliary_keys("engine_type", "kv_cache_mib"),
    ),
    writes=("explorer.rollout_model.kv_cache_mib", *auxiliary_keys("kv_cache_mib")),
)
def kv_cache(ctx: Context) -> None:
    """A vLLM engine's KV cache takes the profile's explicit size where vLLM would size it wrongly from memory shares;
    another engine has no KV cache to size, so a size given to it is refused. Auxiliary models' engines alike."""
    for model in _models(ctx):
        _kv_cache(ctx, model)


def _kv_cache(ctx: Context, model: str) -> None:
    key, size, engine = f"{model}.kv_cache_mib", ctx.facts.rollout_kv_cache_mib, ctx.get(f"{model}.engine_type")
    sized = engines.engine(engine).kv_cache
    if not sized and ctx.get(key) is not None:
        takers = [e for e in engines.ENGINES.values() if e.kv_cache]
        ctx.report(
            "error",
            key,
            f"a KV cache size is {' or '.join(e.label for e in takers)}'s, but the engine is {engine!r}, which keeps "
            "no KV cache of a set size",
            allowed="null",
            hint=f"remove it, or set {model}.engine_type={takers[0].name}",
        )
        return
    if sized and ctx.get(key) is None and size is not None:
        ctx.set(key, size, "kv_cache", (ctx.fact("rollout_kv_cache_mib"), ctx.input(f"{model}.engine_type")))


@rule(
    reads=(
        "explorer.rollout_model.engine_type",
        "explorer.rollout_model.gpu_memory_utilization",
        "explorer.rollout_model.kv_cache_mib",
        *auxiliary_keys("engine_type", "gpu_memory_utilization", "kv_cache_mib"),
    )
)
def memory_utilization(ctx: Context) -> None:
    """A gpu_memory_utilization above what starts vLLM on this hardware is reported with the reason."""
    for model in _models(ctx):
        _memory_utilization(ctx, model)


def _memory_utilization(ctx: Context, model: str) -> None:
    key, ceiling = f"{model}.gpu_memory_utilization", ctx.facts.max_gpu_memory_utilization
    value = ctx.get(key)
    # the ceiling is on the share of device memory an engine takes as its budget at start
    budget = engines.engine(ctx.get(f"{model}.engine_type")).memory == "budget"
    if not budget or not ctx.user_set(key) or value <= ceiling:
        return
    reason = ctx.facts.reasons.get("max_gpu_memory_utilization", "")
    size = ctx.get(f"{model}.kv_cache_mib")
    sized = f" (the KV cache is sized by {model}.kv_cache_mib={size} here)" if size else ""
    ctx.report(
        "warning",
        key,
        f"{value} is above {ceiling}, the most {ctx.loaded.name} allows ({ctx.fact('max_gpu_memory_utilization')})"
        + (f": {reason}" if reason else ""),
        allowed=f"<= {ceiling}",
        hint=f"set {key} to at most {ceiling}, or remove it{sized}",
    )
