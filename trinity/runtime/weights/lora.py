"""LoRA adapters on disk and in flight: PEFT's folder layout, where a role's base model and adapter come from, and
the tensors a sync or a checkpoint is made of.

A LoRA checkpoint holds the adapter as PEFT saves it (adapter_config.json naming its base model, and
adapter_model.safetensors), the base model's config and tokenizer, and on request (trainer.save_merged_model) the
merged model in merged/. A trainer's weights are addressed by their state-dict keys under peft
(`base_model.model.<module>.base_layer.weight`, `<module>.lora_A.<adapter>.weight`, ...); `adapter_outputs` and
`merged_outputs` say which keys make up each tensor the engines or a checkpoint take, and `combine` makes it.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config.lora import ADAPTER_CONFIG, adapter_base, adapter_of, moves_adapter
from ...config.schema import LoRAConfig, RunConfig
from ...config.schema.model import ALL_LINEAR, module_names

ADAPTER_WEIGHTS = "adapter_model.safetensors"
MERGED = "merged"  # the checkpoint's sub-folder holding base + adapter as a plain model
PEFT_PREFIX = "base_model.model."
__all__ = ["ADAPTER_CONFIG", "adapter_base", "adapter_of", "moves_adapter"]  # the config layer's, for the runtime


@dataclass(frozen=True)
class Sources:
    """What a role loads: a base model folder and, on top of it, a PEFT adapter folder (or none)."""

    base: str
    adapter: str | None


def sources(path: str, config: RunConfig) -> Sources:
    """The base model and adapter behind `path`: a model folder, or a LoRA checkpoint (an adapter folder naming its
    base); a run that trains no adapter takes a LoRA checkpoint's merged model."""
    folder = Path(path)
    if not (folder / ADAPTER_CONFIG).is_file():
        lora = adapter_of(config)
        start = lora.path if lora and path == config.model.model_path else None
        return Sources(path, start)
    if adapter_of(config) is None:
        return Sources(str(folder / MERGED), None)
    return Sources(str(adapter_base(folder)), path)


def merged_file(folder: Path) -> Path:
    """Where a LoRA checkpoint keeps its merged model's weights (there with trainer.save_merged_model)."""
    return folder / MERGED / "model.safetensors"


def engine_start(path: str, config: RunConfig) -> tuple[str, bool]:
    """What the engines load to run the model at `path`, and whether they must then wait for the trainer's first
    sync: engines holding merged weights (lora_sync: merged) take a merged model, never an adapter, so one with no
    merged model beside it starts them on the base."""
    start = sources(path, config)
    if moves_adapter(config) or start.adapter is None:
        return path, False
    merged = merged_file(Path(start.adapter))
    if merged.is_file():
        return str(merged.parent), False
    return start.base, True


def engine_file(folder: Path, config: RunConfig) -> Path | None:
    """The file of a checkpoint's weights that the engines load (None: the checkpoint has none for them)."""
    if moves_adapter(config):
        found = folder / ADAPTER_WEIGHTS
    elif (folder / ADAPTER_CONFIG).is_file():  # a LoRA checkpoint, for engines running a plain model
        found = merged_file(folder)
    else:
        found = folder / "model.safetensors"
    return found if found.is_file() else None


def mismatch(folder: Path, config: RunConfig) -> str | None:
    """Why the engines of `config` cannot load a checkpoint that has Hugging Face weights of another kind (None: they
    can, or it has none)."""
    adapter, full = (folder / ADAPTER_WEIGHTS).is_file(), (folder / "model.safetensors").is_file()
    if moves_adapter(config) and full and not adapter:
        return "it holds a full model, and these engines apply a LoRA adapter (synchronizer.lora_sync: adapter)"
    if moves_adapter(config) and adapter:  # the engines apply it with this config's scale (alpha / r)
        saved, lora = json.loads((folder / ADAPTER_CONFIG).read_text()), adapter_of(config)
        if (saved.get("r"), saved.get("lora_alpha")) != (lora.lora_rank, lora.lora_alpha):
            return (
                f"its adapter has r={saved.get('r')}, lora_alpha={saved.get('lora_alpha')}, and this config's "
                f"model.lora_configs[0] has lora_rank={lora.lora_rank}, lora_alpha={lora.lora_alpha}"
            )
    if not moves_adapter(config) and adapter and not merged_file(folder).is_file():
        return (
            "it holds a LoRA adapter without its merged model (trainer.save_merged_model), and these engines run a "
            "plain model"
        )
    return None


def peft_config(lora: LoRAConfig, base: str) -> dict:
    """The adapter's adapter_config.json, as peft's LoraConfig writes it."""
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base,
        "r": lora.lora_rank,
        "lora_alpha": lora.lora_alpha,
        "target_modules": target_modules(lora),
        "exclude_modules": module_names(lora.exclude_modules) or None,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "inference_mode": True,
    }


def target_modules(lora: LoRAConfig) -> str | list[str]:
    """peft's target_modules: 'all-linear', or the names."""
    wanted = module_names(lora.target_modules)
    return ALL_LINEAR if ALL_LINEAR in wanted else wanted


def scale(lora: LoRAConfig) -> float:
    """What B A is multiplied by (peft's scaling without rsLoRA)."""
    return lora.lora_alpha / lora.lora_rank


# --- the tensors a sync or a checkpoint is made of ----------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """One tensor handed on, and the state-dict keys it is made of: (key,) as it is, or (base weight, lora_A, lora_B)
    merged."""

    name: str
    keys: tuple[str, ...]


def is_adapter_key(key: str) -> bool:
    return ".lora_A." in key or ".lora_B." in key


def saved_name(key: str, adapter: str = "default") -> str:
    """A trainer's adapter key as PEFT saves it: without the adapter's name."""
    return key.replace(f".lora_A.{adapter}.", ".lora_A.").replace(f".lora_B.{adapter}.", ".lora_B.")


def plain_name(key: str) -> str:
    """A key of the peft-wrapped model as the plain model names it."""
    return key.removeprefix(PEFT_PREFIX).replace(".base_layer.", ".")


def adapter_outputs(keys: list[str]) -> list[Output]:
    """The adapter's matrices, under PEFT's saved names."""
    return [Output(saved_name(k), (k,)) for k in keys if is_adapter_key(k)]


def merged_outputs(keys: list[str], adapter: str = "default") -> list[Output]:
    """Every weight of the plain model; an adapted layer's weight as base + scale B A."""
    present, out = set(keys), []
    for key in keys:
        if is_adapter_key(key):
            continue
        parts = (key,)
        if key.endswith(".base_layer.weight"):
            module = key.removesuffix("base_layer.weight")
            pair = (f"{module}lora_A.{adapter}.weight", f"{module}lora_B.{adapter}.weight")
            parts = (key, *pair) if all(p in present for p in pair) else parts
        out.append(Output(plain_name(key), parts))
    return out


def combine(tensors: list[Any], factor: float) -> Any:
    """The output of its parts: a tensor as it is, or base + factor B A (in the base's dtype, computed in float32)."""
    if len(tensors) == 1:
        return tensors[0]
    base, a, b = tensors
    return (base.float() + factor * (b.float() @ a.float())).to(base.dtype)


def initial_adapter(base: str, lora: LoRAConfig, folder: Path, seed: int, trust_remote_code: bool = False) -> None:
    """A fresh adapter for the model at `base` as peft initialises one (A Kaiming-uniform, B zero), in float32,
    written as a PEFT folder. verl casts an adapter it creates to the base's dtype, where Adam's small steps round
    away in bfloat16; one it loads keeps float32. The model is built on the meta device (no weights), and the same
    seed gives every trainer rank the same adapter."""
    import math

    import torch
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from transformers import AutoConfig, AutoModelForCausalLM

    settings = peft_config(lora, base)
    with torch.device("meta"):
        shape = AutoConfig.from_pretrained(base, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_config(shape, trust_remote_code=trust_remote_code)
        shapes = {
            k: t.shape for k, t in get_peft_model_state_dict(get_peft_model(model, LoraConfig(**settings))).items()
        }
    generator = torch.Generator().manual_seed(seed)
    weights = {
        name: torch.zeros(size)
        if ".lora_B." in name
        else (torch.rand(size, generator=generator) * 2 - 1) / math.sqrt(size[1])  # kaiming_uniform_(a=sqrt(5))
        for name, size in shapes.items()
    }
    write_adapter(folder, weights, settings)


def write_adapter(folder: Path, weights: dict, settings: dict) -> None:
    """adapter_config.json (`settings`, as peft_config gives them) and adapter_model.safetensors in `folder`; the
    caller makes it atomic. all-linear is written as the modules the adapter holds, as peft itself saves it."""
    from .safetensors import save_safetensors

    if settings["target_modules"] == ALL_LINEAR:
        held = {name.split(".lora_")[0].rpartition(".")[2] for name in weights}
        settings = settings | {"target_modules": sorted(held)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ADAPTER_CONFIG).write_text(json.dumps(settings, indent=2))
    save_safetensors(weights, folder / ADAPTER_WEIGHTS)


def publish_adapter(folder: Path, weights: dict, settings: dict) -> None:
    """`write_adapter` into a fresh folder, renamed into place whole; a folder already there (another worker of the
    node wrote the same version) is kept."""
    import shutil
    import tempfile

    draft = Path(tempfile.mkdtemp(prefix=f"{folder.name}.draft", dir=folder.parent))  # one per writer
    try:
        write_adapter(draft, weights, settings)
    except BaseException:
        shutil.rmtree(draft, ignore_errors=True)
        raise
    try:
        draft.rename(folder)
    except OSError:
        if not (folder / ADAPTER_WEIGHTS).is_file():
            raise
        shutil.rmtree(draft, ignore_errors=True)
