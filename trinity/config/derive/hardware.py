"""Rules that copy hardware facts into the run config: the `hardware` block, trainer device, backends."""

from ...platforms import get_platform
from .. import engines
from ..engines import devices_per_engine
from ..model_folder import hf_config
from ..sources.yaml_file import display_path
from ._context import Context
from ._rule import rule

# verl's generic fused forward (verl/models/transformers/dense_common.py) reads the model's `model` and `lm_head` and
# processes no logits of its own: for these types it computes the model's own log-probs. Others differ (GPT-2 has no
# `model`; Gemma 2 soft-caps its logits; a mixture of experts adds its router's loss).
FUSED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
# FSDP2 steps sharded (DTensor) parameters, and torch shards only AdamW's fused step: SGD's (aten._fused_sgd_) has no
# sharding rule and fails at the first update.
FUSED_OPTIMIZERS = ("adam", "adamw")


@rule(writes=("hardware",))
def hardware_section(ctx: Context) -> None:
    """`hardware:` = the profile's facts, its name and file."""
    facts = ctx.facts.model_dump()
    section = {
        **facts,
        "name": ctx.loaded.name,
        "source": display_path(ctx.loaded.chain[0]),
        "selected_by": ctx.selection,
    }
    ctx.set("hardware", section, "hardware_section", (f"profile {ctx.loaded.name} ({section['source']})",))


@rule(reads=("trainer.device",), writes=("trainer.device",))
def trainer_device(ctx: Context) -> None:
    """trainer.device = the profile's device_type; a contradicting user value is reported, not used."""
    fact = ctx.facts.device_type
    if ctx.user_set("trainer.device") and ctx.get("trainer.device") != fact:
        ctx.report(
            "warning",
            "trainer.device",
            f"{ctx.get('trainer.device')!r} contradicts hardware fact device_type={fact!r} of {ctx.loaded.name} "
            f"({ctx.loaded.where(('facts', 'device_type'))}); using {fact!r}",
            allowed=repr(fact),
            hint="remove trainer.device: the hardware profile decides it",
        )
    ctx.set("trainer.device", fact, "trainer_device", (ctx.fact("device_type"),))


@rule(writes=("trainer.process_group_backend",))
def process_group_backend(ctx: Context) -> None:
    """trainer.process_group_backend: gloo for CPU tensors plus the device's collective, e.g. cpu:gloo,npu:hccl."""
    value = get_platform(ctx.facts.device_type).process_group_backend()
    ctx.set(
        "trainer.process_group_backend",
        value,
        "process_group_backend",
        (ctx.fact("device_type"), ctx.fact("collective_backend")),
    )


@rule(reads=("trainer.use_torch_compile",), writes=("trainer.use_torch_compile",))
def torch_compile(ctx: Context) -> None:
    """trainer.use_torch_compile: the hardware's default when unset; `true` where it cannot work is an error."""
    able = ctx.facts.torch_compile_training
    if ctx.get("trainer.use_torch_compile") is None:
        ctx.set("trainer.use_torch_compile", able, "torch_compile", (ctx.fact("torch_compile_training"),))
    elif ctx.get("trainer.use_torch_compile") and not able:
        reason = ctx.facts.reasons.get("torch_compile_training", "the hardware profile says it is unsupported")
        ctx.report(
            "error",
            "trainer.use_torch_compile",
            f"torch.compile cannot be used for training on {ctx.loaded.name}: {reason}",
            allowed="false",
            hint="set trainer.use_torch_compile: false, or remove it to take the hardware's default",
        )


@rule(reads=("trainer.trainer_strategy",))
def trainer_strategy(ctx: Context) -> None:
    """trainer.trainer_strategy must be one the hardware runs."""
    strategy, able = ctx.get("trainer.trainer_strategy"), ctx.facts.trainer_strategies
    if strategy not in able:
        reason = ctx.facts.reasons.get("trainer_strategies", "")
        ctx.report(
            "error",
            "trainer.trainer_strategy",
            f"{strategy!r} does not run on {ctx.loaded.name}" + (f": {reason}" if reason else ""),
            allowed=", ".join(able),
            hint=f"set trainer.trainer_strategy={able[0]}",
        )


@rule(reads=("explorer.rollout_model.dtype", "explorer.auxiliary_models.*.dtype", "trainer.param_dtype"))
def dtypes(ctx: Context) -> None:
    """Every inference engine's dtype and the trainer's must be one the chip computes in."""
    keys = [f"{key}.dtype" for key, _ in _engines(ctx)] + ["trainer.param_dtype"]
    for key in keys:
        if ctx.get(key) not in ctx.facts.dtypes:
            ctx.report(
                "error",
                key,
                f"{ctx.get(key)} is not supported by {ctx.facts.chip} ({ctx.loaded.name})",
                allowed=", ".join(ctx.facts.dtypes),
                hint=f"set {key}={ctx.facts.dtypes[0]}",
            )


@rule(
    reads=(
        "explorer.rollout_model.data_parallel_size",
        "explorer.rollout_model.engine_type",
        "explorer.rollout_model.pipeline_parallel_size",
        "explorer.rollout_model.tensor_parallel_size",
        "explorer.auxiliary_models.*.data_parallel_size",
        "explorer.auxiliary_models.*.engine_type",
        "explorer.auxiliary_models.*.pipeline_parallel_size",
        "explorer.auxiliary_models.*.tensor_parallel_size",
    )
)
def rollout_engines(ctx: Context) -> None:
    """Every engine's type must run on the hardware, and fit the devices that type can drive."""
    for key, engine in _engines(ctx):
        kind = engine["engine_type"]
        if kind not in ctx.facts.rollout_engines:
            reason = ctx.facts.reasons.get("rollout_engines", "")
            ctx.report(
                "error",
                f"{key}.engine_type",
                f"{kind!r} does not run on {ctx.loaded.name}" + (f": {reason}" if reason else ""),
                allowed=", ".join(ctx.facts.rollout_engines),
                hint=f"set {key}.engine_type={ctx.facts.rollout_engines[0]}, or remove it to take the profile's",
            )
        devices = devices_per_engine(engine)
        if not engines.engine(kind).parallel and devices > 1:  # no tensor, pipeline or data parallelism
            ctx.report(
                "error",
                f"{key}.tensor_parallel_size",
                f"one {kind} engine drives 1 device; TP x PP x DP = {devices}",
                allowed="tensor_parallel_size x pipeline_parallel_size x data_parallel_size = 1",
                hint=f"raise {key}.engine_num instead, or use an engine type with tensor parallelism",
            )


@rule(reads=("trainer.attn_implementation",), writes=("trainer.attn_implementation",))
def attn_implementation(ctx: Context) -> None:
    """trainer.attn_implementation: the user's, else the profile's kernel (flash-attn does not exist everywhere;
    preflight checks that the one chosen is installed)."""
    _fact_default(ctx, "trainer.attn_implementation", "attn_implementation", "attn_implementation")


@rule(reads=("trainer.attn_implementation", "trainer.use_remove_padding"), writes=("trainer.use_remove_padding",))
def remove_padding(ctx: Context) -> None:
    """trainer.use_remove_padding: the user's, else whether trainer.attn_implementation (the user's or the profile's,
    set by attn_implementation before) has a variable-length kernel here (facts.varlen_attention). Any other kernel
    attends verl's packed row with a dense block mask, so the user's `true` with one is warned about."""
    key, attn, varlen = "trainer.use_remove_padding", ctx.get("trainer.attn_implementation"), ctx.facts.varlen_attention
    if not ctx.user_set(key):
        ctx.set(key, attn in varlen, "remove_padding", (ctx.fact("varlen_attention"), _attn_input(ctx)))
    elif ctx.get(key) and attn not in varlen:
        reason = ctx.facts.reasons.get(
            "varlen_attention", "the packed row is attended with a dense block mask, O(L^2) time and memory"
        )
        kernels = " or ".join(varlen)
        ctx.report(
            "warning",
            key,
            f"true packs each micro-batch into one row, and {_attn_input(ctx)} is not one of the kernels with "
            f"variable-length attention on {ctx.loaded.name}, {ctx.fact('varlen_attention')}: {reason}",
            allowed=f"true with trainer.attn_implementation {kernels}; false" if varlen else "false",
            hint=(f"set trainer.attn_implementation: {varlen[0]}, or " if varlen else "")
            + f"remove trainer.use_remove_padding to take the derived value (false with {attn!r})",
        )


def _attn_input(ctx: Context) -> str:
    """trainer.attn_implementation as a rule input: the user's (where written), else the profile's fact."""
    key = "trainer.attn_implementation"
    if ctx.user_set(key):
        return ctx.input(key)
    return f"{key}={ctx.get(key)!r} (the profile's: {ctx.fact('attn_implementation')})"


@rule(reads=("model.model_path", "trainer.use_fused_kernels"), writes=("trainer.use_fused_kernels",))
def fused_kernels(ctx: Context) -> None:
    """trainer.use_fused_kernels: the user's, else whether they pay on this hardware (facts.fused_kernels) for a model
    whose type verl's fused forward computes alike (FUSED_MODEL_TYPES); a model folder not on this machine, which
    `run` refuses anyway, leaves the fact."""
    key = "trainer.use_fused_kernels"
    if ctx.user_set(key):
        return
    kind = (hf_config(ctx.get("model.model_path")) or {}).get("model_type")
    fits = kind is None or kind in FUSED_MODEL_TYPES
    model = f"model type {kind!r}: {'one' if fits else 'not one'} of {', '.join(FUSED_MODEL_TYPES)}"
    if kind is None:
        model = f"no model type read ({ctx.input('model.model_path')} has no config.json here)"
    ctx.set(key, ctx.facts.fused_kernels and fits, "fused_kernels", (ctx.fact("fused_kernels"), model))


@rule(reads=("algorithm.optimizer.optimizer_type", "trainer.fused_optimizer"), writes=("trainer.fused_optimizer",))
def fused_optimizer(ctx: Context) -> None:
    """trainer.fused_optimizer: the user's, else whether torch's fused step pays here (facts.fused_optimizer) for an
    optimizer whose fused step runs sharded (FUSED_OPTIMIZERS); the user's true for another is refused."""
    key, kind = "trainer.fused_optimizer", ctx.get("algorithm.optimizer.optimizer_type")
    fits = kind in FUSED_OPTIMIZERS
    if ctx.user_set(key):
        if ctx.get(key) and not fits:
            ctx.report(
                "error",
                key,
                f"torch's fused {kind} step does not run on FSDP2's sharded parameters (no DTensor sharding rule)",
                allowed=f"true with algorithm.optimizer.optimizer_type {' or '.join(FUSED_OPTIMIZERS)}; false",
                hint=f"set {key}=false, or algorithm.optimizer.optimizer_type=adamw",
            )
        return
    optimizer = f"{ctx.input('algorithm.optimizer.optimizer_type')}: {'one' if fits else 'not one'} of " + ", ".join(
        FUSED_OPTIMIZERS
    )
    ctx.set(key, ctx.facts.fused_optimizer and fits, "fused_optimizer", (ctx.fact("fused_optimizer"), optimizer))


@rule(reads=("trainer.enable_gradient_checkpointing",), writes=("trainer.enable_gradient_checkpointing",))
def gradient_checkpointing(ctx: Context) -> None:
    """trainer.enable_gradient_checkpointing: the user's, else the profile's (facts.gradient_checkpointing); the memory
    fit check names it as the fix where a trainer does not fit without it."""
    _fact_default(ctx, "trainer.enable_gradient_checkpointing", "gradient_checkpointing", "gradient_checkpointing")


@rule(reads=("cluster.train_stage_devices",), writes=("cluster.train_stage_devices",))
def train_stage_devices(ctx: Context) -> None:
    """cluster.train_stage_devices: the user's, else the profile's (facts.train_stage_devices)."""
    _fact_default(ctx, "cluster.train_stage_devices", "train_stage_devices", "train_stage_devices")


def _fact_default(ctx: Context, key: str, fact: str, rule: str) -> None:
    """`key` is the user's value, else the profile's fact `fact` (recorded as set by `rule`)."""
    if not ctx.user_set(key):
        ctx.set(key, getattr(ctx.facts, fact), rule, (ctx.fact(fact),))


def _engines(ctx: Context) -> list[tuple[str, dict]]:
    """(key, section) of the rollout model and of each auxiliary model: every engine the run may start."""
    auxiliary = ctx.get("explorer.auxiliary_models") or []
    return [("explorer.rollout_model", ctx.get("explorer.rollout_model"))] + [
        (f"explorer.auxiliary_models[{i}]", model) for i, model in enumerate(auxiliary)
    ]
