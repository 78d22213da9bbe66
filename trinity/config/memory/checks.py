"""Checks: one role's memory on one device against what the device gives it, built from the run config.

Roles follow the derived device split: the trainer on `cluster.trainer_gpu_num` devices, each vLLM
rollout engine on its own devices, and in `colocate` both on the same devices: vLLM
asleep while the trainer updates (its context stays), the trainer keeping what it does not offload
while vLLM generates.
"""

from math import ceil
from typing import NamedTuple

from .. import engines, modes
from ..algorithms import uses_critic, uses_reference
from ..lora import adapter_of, moves_adapter
from ..schema import RunConfig
from ..schema.explorer import InferenceModelConfig
from .estimate import DEVICE_RUNTIME, GIB, Estimate, Item
from .lora import Adapter, adapter
from .rollout import EngineSetup, LoRASlot, engine_estimate, kv_cache_room, kv_cache_wanted, sequences_that_fit
from .shape import ModelShape
from .trainer import MICRO_BATCH_SIZE, TrainerSetup, idle_bytes, trainer_estimate

TIGHT = 0.9  # above this share of its capacity a check is tight


class Knob(NamedTuple):
    """A change that makes a check fit, and the check's need with it."""

    change: str
    need: int
    effect: str = ""


class Check(NamedTuple):
    """One role's memory on one device against what that device gives it."""

    role: str
    key: str  # the config key an issue about this check is attached to
    subject: str
    devices: int
    capacity: int
    capacity_label: str  # how the capacity comes about, when it is not simply the device's memory
    estimate: Estimate
    hard: bool = True  # over capacity: an error (hard) or a warning (vLLM queues sequences)
    knobs: tuple[Knob, ...] = ()

    @property
    def need(self) -> int:
        """Bytes per device at the peak."""
        return self.estimate.peak

    @property
    def share(self) -> float:
        """Need over capacity."""
        return self.need / self.capacity if self.capacity > 0 else float("inf")

    @property
    def status(self) -> str:
        """'fits', 'tight' (over 90 %) or 'does not fit'."""
        return status(self.need, self.capacity)


def status(need: int, capacity: int) -> str:
    """'fits', 'tight' (over 90 % of capacity) or 'does not fit'."""
    if need > capacity:
        return "does not fit"
    return "tight" if need > TIGHT * capacity else "fits"


def devices(count: int) -> str:
    """'1 device', '4 devices'."""
    return f"{count} device{'' if count == 1 else 's'}"


def trainer_setup(
    config: RunConfig, shape: ModelShape, devices: int, teacher: ModelShape | None = None
) -> TrainerSetup | None:
    """The trainer's setup from the config (and a distillation teacher's shape), None when its tokens per micro-batch
    are unknown."""
    tokens = trainer_tokens(config)
    if tokens is None:
        return None
    return TrainerSetup(
        actor=shape,
        devices=devices,
        tokens=tokens,
        checkpointing=config.trainer.enable_gradient_checkpointing,
        reference=needs_reference(config),
        critic=shape if uses_critic(config.algorithm.advantage_fn) else None,
        teacher=teacher,
        param_offload=config.trainer.param_offload,
        optimizer_offload=config.trainer.optimizer_offload,
        lora=trained_adapter(config),
        param_dtype=config.trainer.param_dtype,
    )


def trained_adapter(config: RunConfig) -> Adapter | None:
    """The LoRA adapter the actor trains (model.lora_configs[0]), None when every weight trains."""
    lora = adapter_of(config)
    return adapter(lora.lora_rank, lora.target_modules, lora.exclude_modules) if lora else None


def engine_slot(config: RunConfig, engine: InferenceModelConfig) -> LoRASlot | None:
    """The adapter slot an engine keeps: only where it applies the adapter itself (synchronizer.lora_sync: adapter)."""
    if not moves_adapter(config):
        return None  # merged: the engines hold plain full weights
    lora = adapter_of(config)
    rank = engines.engine(engine.engine_type).adapter_rank(lora.lora_rank)  # vLLM's max_lora_rank
    dtype = engine.dtype if lora.lora_dtype == "auto" else lora.lora_dtype
    return LoRASlot(rank, dtype, config.model.fully_sharded_loras)


def trainer_tokens(config: RunConfig) -> int | None:
    """Tokens of one micro-batch on one trainer device (trainer.py says why)."""
    trainer, length = config.trainer, config.model.max_model_len
    if trainer.use_dynamic_bsz:
        return trainer.max_token_len_per_gpu or (2 * length if length else None)
    return MICRO_BATCH_SIZE * ceil(length / trainer.ulysses_sequence_parallel_size) if length else None


def needs_reference(config: RunConfig) -> bool:
    """Whether the trainer keeps a reference model: a KL loss or a KL penalty needs one (presets fill both)."""
    return uses_reference(config.algorithm)


def trainer_capacity(config: RunConfig, memory: int) -> tuple[int, str]:
    """What a device gives the trainer: all of it, less a sleeping engine's context where they share devices."""
    if modes.mode(config.mode).shares_devices:
        return (
            memory - DEVICE_RUNTIME,
            f"{memory / GIB:.0f} GiB less {DEVICE_RUNTIME / GIB:.0f} GiB for the sleeping "
            f"{_label(config.explorer.rollout_model)} engine",
        )
    return memory, ""


def trainer_check(config: RunConfig, setup: TrainerSetup, memory: int, name: str) -> Check:
    """The trainer's memory on one of its devices."""
    capacity, label = trainer_capacity(config, memory)
    lora = f", LoRA rank {setup.lora.rank}" if setup.lora else ""
    subject = f"trainer ({name}{lora}, FSDP over {devices(setup.devices)}, {setup.tokens} tokens per micro-batch)"
    return Check("trainer", "model.model_path", subject, setup.devices, capacity, label, trainer_estimate(setup))


def engine_setup(config: RunConfig, engine: InferenceModelConfig, shape: ModelShape, memory: int) -> EngineSetup | None:
    """An engine's setup from the config, None when its max_model_len is unknown."""
    if engine.max_model_len is None:
        return None
    return EngineSetup(
        shape=shape,
        dtype=engine.dtype,
        tensor_parallel=engine.tensor_parallel_size,
        pipeline_parallel=engine.pipeline_parallel_size,
        max_model_len=engine.max_model_len,
        sequences=config.explorer.runner_per_model * config.algorithm.repeat_times,
        budget=int(engine.gpu_memory_utilization * memory),
        lora=engine_slot(config, engine),
    )


def engine_check(key: str, engine: InferenceModelConfig, setup: EngineSetup, memory: int, name: str) -> Check:
    """Whether the engine can start: weights, workspace and one full-length sequence inside its budget."""
    per_engine = setup.tensor_parallel * setup.pipeline_parallel
    subject = f"{_label(engine)} engine ({name}, {devices(per_engine)} per engine)"
    label = f"gpu_memory_utilization {engine.gpu_memory_utilization} x {memory / GIB:.0f} GiB"
    return Check(
        key,
        f"{key}.gpu_memory_utilization",
        subject,
        engine.engine_num * per_engine,
        setup.budget,
        label,
        engine_estimate(setup),
    )


def length_key(config: RunConfig, key: str, engine: InferenceModelConfig) -> str:
    """The key that sets an engine's max_model_len: its own, or model.max_model_len it was derived from."""
    derived = key == "explorer.rollout_model" and engine.max_model_len == config.model.max_model_len
    return "model.max_model_len" if derived else f"{key}.max_model_len"


def sequences_check(config: RunConfig, key: str, engine: InferenceModelConfig, setup: EngineSetup, name: str) -> Check:
    """Whether the KV cache holds every sequence the explorer sends at once (a warning when not)."""
    item = Item(f"KV cache for {setup.concurrent} sequences of {setup.max_model_len} tokens", kv_cache_wanted(setup))
    room = kv_cache_room(setup)
    label = f"the budget left after weights, workspace and runtime (room for {sequences_that_fit(setup)} of them)"
    return Check(
        key,
        length_key(config, key, engine),
        f"{_label(engine)} KV cache ({name})",
        1,
        room,
        label,
        Estimate((item,)),
        hard=False,
    )


def shared_device_check(
    key: str, engine: InferenceModelConfig, setup: EngineSetup, trainer: TrainerSetup, memory: int
) -> Check:
    """colocate: vLLM's budget plus what the trainer keeps between updates, on one device."""
    kept = [
        name
        for name, off in (("weights", trainer.param_offload), ("Adam moments", trainer.optimizer_offload))
        if not off
    ]
    items = (
        Item(f"{_label(engine)} budget (gpu_memory_utilization {engine.gpu_memory_utilization})", setup.budget),
        Item(f"trainer between updates ({' and '.join(kept + ['runtime'])})", idle_bytes(trainer)),
    )
    subject = "rollout and trainer on one device (colocate)"
    return Check("colocate", f"{key}.gpu_memory_utilization", subject, trainer.devices, memory, "", Estimate(items))


def _label(engine: InferenceModelConfig) -> str:
    """How the checks name an engine's type (its registry entry's label)."""
    return engines.engine(engine.engine_type).label
