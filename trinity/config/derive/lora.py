"""Rules for a LoRA run: one adapter, its settings taken from a pre-trained adapter when it names one, its modules
checked against the model's own names, and each engine given only the LoRA settings it honours."""

import json
from pathlib import Path

from .. import engines, model_folder, model_modules, modes
from ..lora import adapter_base
from ..schema.model import ALL_LINEAR, module_names
from ._context import Context
from ._rule import rule

LORAS, ROLLOUT = "model.lora_configs", "explorer.rollout_model"
FROM_ADAPTER = {
    "lora_rank": "r",
    "lora_alpha": "lora_alpha",
    "target_modules": "target_modules",
    "exclude_modules": "exclude_modules",
}
# PEFT settings an adapter may carry that trinity's merge, sync and engines do not apply: refused unless as here
PLAIN_ADAPTER = {
    "use_rslora": False,
    "use_dora": False,
    "bias": "none",
    "lora_bias": False,
    "rank_pattern": {},
    "alpha_pattern": {},
    "modules_to_save": None,
    "layers_to_transform": None,
    "layer_replication": None,
    "trainable_token_indices": None,
    "target_parameters": None,
    "alora_invocation_tokens": None,
    "fan_in_fan_out": False,
}
YAML = {None: "null", False: "false"}  # how a value is written in the config
# what an engine's entry may honour (EngineEntry.lora_args): the key, and the value that asks nothing of the engine
ENGINE_KEYS = {
    "max_cpu_loras": ("model.max_cpu_loras", None),
    "fully_sharded_loras": ("model.fully_sharded_loras", False),
    "lora_dtype": (f"{LORAS}[0].lora_dtype", "auto"),
}


@rule(
    reads=(
        "algorithm.kl_loss_fn",
        "model.lora_configs.*.lora_alpha",
        "model.lora_configs.*.lora_rank",
        "model.lora_configs.*.name",
        "model.lora_configs.*.path",
        "model.lora_configs.*.target_modules",
        "model.model_path",
    ),
    writes=(
        "model.lora_configs.*.lora_alpha",
        "model.lora_configs.*.lora_rank",
        "model.lora_configs.*.name",
        "model.lora_configs.*.target_modules",
    ),
)
def lora_adapter(ctx: Context) -> None:
    """One adapter: its name defaults to 'default' (peft's); a pre-trained one's rank, alpha and modules are used."""
    loras = ctx.get(LORAS)
    if not loras:
        return
    for extra in range(1, len(loras)):
        ctx.report(
            "error",
            f"{LORAS}[{extra}]",
            f"trinity trains one LoRA adapter; {len(loras)} are configured",
            allowed="one entry",
            hint=f"keep {LORAS}[0] and remove the others",
        )
    first = f"{LORAS}[0]"
    if ctx.get(f"{first}.name") is None:
        ctx.set(f"{first}.name", "default", "lora_adapter", ())
    key = adapter_source(ctx)
    if key is not None:
        _from_adapter(ctx, first, key)


def adapter_source(ctx: Context) -> str | None:
    """The key naming the adapter the run goes on training: model.lora_configs[0].path, or model.model_path where it
    is a LoRA checkpoint (an adapter folder naming its base); None for a fresh adapter."""
    if ctx.get(f"{LORAS}[0].path") is not None:
        return f"{LORAS}[0].path"
    return "model.model_path" if adapter_base(model_folder.where(ctx.get("model.model_path"))) is not None else None


def _from_adapter(ctx: Context, first: str, key: str) -> None:
    folder = Path(ctx.get(key))
    try:
        saved = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        ctx.report(
            "error",
            key,
            f"{str(folder)!r} is not a readable PEFT adapter folder ({_reason(exc)})",
            allowed="a folder with adapter_config.json and adapter_model.safetensors (peft's save_pretrained)",
            hint="paths are relative to the directory trinity runs in",
        )
        return
    for setting, plain in PLAIN_ADAPTER.items():
        value = saved.get(setting)
        if value not in (None, plain, {}, []):  # unset, as plain, or empty
            ctx.report(
                "error",
                key,
                f"the adapter at {str(folder)!r} has {setting}={saved[setting]!r}, which trinity's merge, sync and "
                "engines do not apply",
                allowed=f"{setting}: {plain!r} (a plain LoRA adapter)",
                hint="train a plain adapter, or merge this one into the model and set model.model_path to it",
            )
    if ctx.get("algorithm.kl_loss_fn") not in (None, "none"):
        ctx.report(
            "warning",
            "algorithm.kl_loss_fn",
            f"the run goes on training the adapter at {str(folder)!r}: its KL reference is the base model (the "
            "adapter switched off), not the adapter the run starts from",
            hint="set kl_loss_fn: none to train without it",
        )
    for ours, theirs in FROM_ADAPTER.items():
        value = saved.get(theirs)
        if isinstance(value, list):
            value = ",".join(value)
        written = f"{first}.{ours}"
        if value is None or value == ctx.get(written):
            continue
        if ctx.user_set(written):
            ctx.report(
                "error",
                written,
                f"{ctx.get(written)!r} differs from the adapter at {str(folder)!r}, which has {theirs}={value!r}",
                allowed=repr(value),
                hint=f"remove {written}: the adapter's own value is used",
            )
            continue
        ctx.set(written, value, "lora_adapter", (ctx.input(key),))


def _reason(exc: Exception) -> str:
    return f"no adapter_config.json: {exc.strerror}" if isinstance(exc, OSError) else f"adapter_config.json: {exc}"


@rule(reads=("model.lora_configs.*.exclude_modules", "model.lora_configs.*.target_modules", "model.model_path"))
def lora_modules(ctx: Context) -> None:
    """target_modules and exclude_modules name modules the model has (read from its weights' headers, where the
    model folder is on this machine)."""
    if not ctx.get(LORAS):
        return
    targets = f"{LORAS}[0].target_modules"
    # adapters on embeddings and output heads: peft names their matrices otherwise
    heads = [n for n in module_names(ctx.get(targets)) if n.startswith("embed") or n in model_modules.OUTPUT_HEADS]
    if heads:
        ctx.report(
            "error",
            targets,
            f"adapters on embeddings or the output head ({', '.join(map(repr, heads))}) are not supported: trinity "
            "syncs and merges adapters of linear layers",
            allowed="the decoder layers' linear modules, or all-linear (which leaves the output head out)",
            hint=f"remove {', '.join(heads)} from target_modules",
        )
    folder = model_folder.where(ctx.get("model.model_path"))
    base = adapter_base(folder)
    # a LoRA checkpoint: its base's weights
    modules = model_modules.read(model_folder.where(base) if base is not None else folder)
    if modules is None:
        return  # not a local folder of safetensors: `trinity run` stops at the model path, or peft names the module
    for field, pool, what in (
        ("target_modules", modules.linear, "linear modules"),
        ("exclude_modules", modules.every, "modules"),
    ):
        key = f"{LORAS}[0].{field}"
        wanted = module_names(ctx.get(key))
        unknown = [n for n in wanted if n != ALL_LINEAR and n not in pool]
        if unknown:
            ctx.report(
                "error",
                key,
                f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not among the model's {what}",
                allowed=", ".join(sorted(pool)) + (f", or {ALL_LINEAR}" if field == "target_modules" else ""),
                hint=f"the names come from {ctx.get('model.model_path')}'s weights; write them comma-separated",
            )


@rule(
    reads=(
        "explorer.rollout_model.engine_type",
        "mode",
        "model.fully_sharded_loras",
        "model.lora_configs.*.lora_dtype",
        "model.lora_configs.*.lora_rank",
        "model.lora_configs.*.path",
        "model.max_cpu_loras",
        "model.model_path",
        "synchronizer.lora_sync",
        "trainer.save_merged_model",
        "trainer.trainer_strategy",
    )
)
def lora_engine(ctx: Context) -> None:
    """Each engine takes only the LoRA settings it honours; an adapter's rank fits what the engine serves."""
    kind = ctx.get(f"{ROLLOUT}.engine_type")
    entry = engines.engine(kind)
    lora, adapter = ctx.get(LORAS), ctx.get("synchronizer.lora_sync") == "adapter"
    honoured = set(entry.lora_args) if lora and adapter else set()
    why = "the run trains no LoRA adapter" if not lora else None
    why = why or ("synchronizer.lora_sync is 'merged' (the engines hold plain weights)" if not adapter else None)
    why = why or f"the {entry.label} engine does not take it"
    for key in ("synchronizer.lora_sync", "trainer.save_merged_model"):
        if not lora and ctx.user_set(key) and ctx.get(key) is not False:
            ctx.report("error", key, f"is set, but {why}", allowed="unset", hint="remove it")
    mode, source = ctx.get("mode"), adapter_source(ctx) if lora else None
    merged = source is not None and (model_folder.where(ctx.get(source)) / "merged" / "model.safetensors").is_file()
    if source and not adapter and not merged and not modes.mode(mode).trains:
        ctx.report(
            "error",
            source,
            f"holding merged weights (synchronizer.lora_sync: merged), the engines take no adapter, and mode "
            f"{mode!r} has no trainer to sync them base + adapter",
            allowed="a path with lora_sync: adapter, or in a mode that trains",
            hint="set synchronizer.lora_sync: adapter, or save the merged model beside the adapter "
            "(trainer.save_merged_model)",
        )
    if lora and adapter and entry.lora_dtypes and lora[0]["lora_dtype"] not in entry.lora_dtypes:
        ctx.report(
            "error",
            f"{LORAS}[0].lora_dtype",
            f"{lora[0]['lora_dtype']!r} is not a dtype {entry.label} keeps adapters in",
            allowed=", ".join(entry.lora_dtypes),
            hint="set lora_dtype: auto (the rollout dtype)",
        )
    if lora and (ctx.get("model.max_cpu_loras") or 1) > 1:
        ctx.report(
            "error",
            "model.max_cpu_loras",
            f"{ctx.get('model.max_cpu_loras')}: the engines serve one adapter, the current weight version's, and drop "
            "the last one at each sync; more host slots would hold nothing",
            allowed="1, or unset",
            hint="remove model.max_cpu_loras",
        )
    if lora and ctx.get("trainer.trainer_strategy") == "fsdp":
        ctx.report(
            "error",
            "trainer.trainer_strategy",
            "'fsdp' (FSDP1) gathers the whole model on every rank for each sync of a LoRA adapter",
            allowed="fsdp2",
            hint="set trainer.trainer_strategy: fsdp2",
        )
    for arg, (key, neutral) in ENGINE_KEYS.items():
        if (lora or not key.startswith(LORAS)) and ctx.get(key) != neutral and arg not in honoured:
            takers = [e.name for e in engines.ENGINES.values() if arg in e.lora_args]
            ctx.report(
                "error",
                key,
                f"is set, but {why}",
                allowed=f"{YAML.get(neutral, neutral)} here; {', '.join(takers)} engines with adapters take it",
                hint=f"remove {key}",
            )
    if lora and adapter and entry.lora_ranks:
        rank = ctx.get(f"{LORAS}[0].lora_rank")
        if rank > max(entry.lora_ranks):
            ctx.report(
                "error",
                f"{LORAS}[0].lora_rank",
                f"{rank} is above the highest rank {entry.label} serves adapters at ({max(entry.lora_ranks)})",
                allowed=f"<= {max(entry.lora_ranks)}",
                hint="lower lora_rank, or set synchronizer.lora_sync: merged (the engines then take merged weights)",
            )


@rule(reads=("model.lora_configs.*.base_model_name", "model.model_path"))
def lora_base_name(ctx: Context) -> None:
    """A LoRA adapter's base_model_name is what vLLM records as its base (LoRARequest.base_model_name, as Trinity-RFT
    passes it); the adapter is trained on and applied to model.model_path whatever it says, so another name warns."""
    model = ctx.get("model.model_path")
    for i, lora in enumerate(ctx.get(LORAS) or []):
        name = lora["base_model_name"]
        if name is not None and name != model:
            ctx.report(
                "warning",
                f"{LORAS}.{i}.base_model_name",
                f"{name!r} is not model.model_path {model!r}: the adapter is trained on and applied to {model!r}; "
                "vLLM only records this name as its base",
                allowed=repr(model),
                hint=f"remove {LORAS}[{i}].base_model_name, or set it to model.model_path",
            )
