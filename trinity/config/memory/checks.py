"""Checks: one role's memory on one device against what the device gives it, built from the run config.

Roles follow the derived device split: the trainer on `cluster.trainer_gpu_num` devices, each rollout engine on its
own devices, and in `colocate` both on the same devices: the engine asleep while the trainer updates (its context
stays), the trainer keeping what it does not offload while the engine generates, and what its allocator still caches
after the runtime handed the cached blocks back (`empty_cache`) before the engines woke (allocator.py).
"""

from math import ceil
from typing import NamedTuple

from .. import engines, modes
from ..algorithms.queries import uses_critic, uses_reference
from ..lora import adapter_of, moves_adapter
from ..schema import RunConfig
from ..schema.explorer import InferenceModelConfig
from ..unsharded import only_copies_on_one_rank
from .estimate import DTYPE_BYTES, GIB, Estimate, Item, runtime
from .generate import GenerateSetup, generate_estimate
from .lora import Adapter, adapter, adapter_params, linear_features
from .rollout import (
    EngineSetup,
    LoRASlot,
    engine_estimate,
    kv_cache_room,
    kv_cache_wanted,
    sequences_that_fit,
    weights_item,
)
from .shape import ModelShape
from .sync import SYNC, SyncSetup, trainer_sync_items
from .trainer import MICRO_BATCH_SIZE, TrainerSetup, idle_items, trainer_estimate

GENERATE = "engines generate"  # a shared device's phase: the engines awake, the trainer between updates
FP32 = DTYPE_BYTES["float32"]  # the trainer's master weights, as FSDP gathers them for a sync
ALLOC_CONF_SUFFIX = "_ALLOC_CONF"  # PYTORCH_CUDA_ALLOC_CONF, PYTORCH_NPU_ALLOC_CONF: the caching allocator's settings
EXPANDABLE = "expandable_segments:true"

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
        device_type=config.hardware.device_type,
        sync=sync_setup(config, shape),
        expandable_segments=expandable_segments(config),
        copies_only=only_copies_on_one_rank(config),
    )


def expandable_segments(config: RunConfig) -> bool:
    """Whether the trainer's caching allocator maps memory in pages: expandable_segments:True in its *_ALLOC_CONF."""
    env = config.env.common | config.env.trainer
    return any(k.endswith(ALLOC_CONF_SUFFIX) and EXPANDABLE in str(v).lower().replace(" ", "") for k, v in env.items())


def sync_setup(config: RunConfig, shape: ModelShape) -> SyncSetup | None:
    """The weight sync of a stage whose trainer moves its weights to the stage's engines, None in one without."""
    channel = config.synchronizer.sync_channel
    if not modes.mode(config.mode).syncs or channel is None:
        return None
    lora = trained_adapter(config) if moves_adapter(config) else None
    largest, total = _adapter_sent(shape, lora) if lora else _weights_sent(shape)
    d = DTYPE_BYTES[config.explorer.rollout_model.dtype]  # the trainer casts what it sends to the rollout dtype
    gathered = largest * FP32  # what FSDP gathers: the fp32 master weight
    return SyncSetup(channel, config.synchronizer.bucket_bytes, largest * d, total * d, gathered)


def _weights_sent(shape: ModelShape) -> tuple[int, int]:
    """(largest, all) in values: every weight, a tied lm_head sent again under its own name."""
    largest = max(shape.vocab * shape.hidden, *(i * o for i, o in linear_features(shape).values()))
    return largest, shape.params + shape.vocab * shape.hidden * shape.tied


def _adapter_sent(shape: ModelShape, lora: Adapter) -> tuple[int, int]:
    """(largest, all) in values: the adapter's matrices, r x in and out x r for each adapted module."""
    features = linear_features(shape)
    widest = [max(features[m]) for m in lora.modules if m in features]
    widest += [shape.vocab for m in lora.modules if m not in features]  # lm_head, embed_tokens: V wide
    return lora.rank * max(widest, default=0), adapter_params(shape, lora)


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
    """What a device gives the trainer: all of it, less a sleeping engine's runtime where they share devices."""
    if modes.mode(config.mode).shares_devices:
        asleep = runtime(config.hardware.device_type).engine
        return (
            memory - asleep,
            f"{memory / GIB:.0f} GiB less {asleep / GIB:.1f} GiB for the sleeping "
            f"{_label(config.explorer.rollout_model)} engine",
        )
    return memory, ""


def trainer_check(config: RunConfig, setup: TrainerSetup, memory: int, name: str) -> Check:
    """The trainer's memory on one of its devices."""
    capacity, label = trainer_capacity(config, memory)
    lora = f", LoRA rank {setup.lora.rank}" if setup.lora else ""
    subject = f"trainer ({name}{lora}, FSDP over {devices(setup.devices)}, {setup.tokens} tokens per micro-batch)"
    return Check("trainer", "model.model_path", subject, setup.devices, capacity, label, trainer_estimate(setup))


def concurrent_sequences(config: RunConfig) -> int:
    """Sequences one engine is sent at once: each of its runners runs a task's repeat_times rollouts, or at most
    explorer.max_repeat_times_per_runner of them (a task split into runs, runtime/explorer/runs.py)."""
    repeats = config.algorithm.repeat_times
    per_runner = min(repeats, config.explorer.max_repeat_times_per_runner or repeats)
    return config.explorer.runner_per_model * per_runner


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
        sequences=concurrent_sequences(config),
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


def shared_device_check(issue_key: str, engine: Item, weights: Item, trainer: TrainerSetup, memory: int) -> Check:
    """colocate: what the trainer holds when the engines wake (its allocator cache included), beside the engine in
    each of its phases, on one device: a weight sync, its weights awake (`weights`) and the trainer's sync buffers
    (runtime/driver/device_handoff.py); then generating, the engine awake (`engine`: vLLM's budget, or another
    engine at its peak). An issue is attached to `issue_key`."""
    awake = Item(engine.label, engine.bytes, GENERATE)
    during_sync = (Item(weights.label, weights.bytes, SYNC), *_sync_items(trainer))
    items = (*idle_items(trainer), *during_sync, awake)
    subject = "rollout and trainer on one device (colocate)"
    return Check("colocate", issue_key, subject, trainer.devices, memory, "", Estimate(items))


def _sync_items(trainer: TrainerSetup) -> list[Item]:
    """What the trainer rank beside the engine holds in device memory while the engine loads a sync: device IPC's
    buffers, which the engine maps (the other channels' pieces are the host's, gone before the engine loads them)."""
    if trainer.sync is None:
        return []
    return [i for i in trainer_sync_items(trainer.sync, host=False) if i.phase == SYNC]


def budget_item(engine: InferenceModelConfig, setup: EngineSetup) -> Item:
    """vLLM's part of a shared device: the budget it takes when it wakes."""
    return Item(f"{_label(engine)} budget (gpu_memory_utilization {engine.gpu_memory_utilization})", setup.budget)


def weights_awake_item(config: RunConfig, engine: InferenceModelConfig, setup: EngineSetup) -> Item:
    """vLLM's part of a shared device during a weight sync: its runtime and its weights, its KV cache asleep."""
    held = runtime(config.hardware.device_type).engine + weights_item(setup).bytes
    return Item(f"{_label(engine)} runtime and weights (its KV cache asleep)", held)


def peak_item(engine: InferenceModelConfig, check: Check) -> Item:
    """An engine without a budget's part of a shared device: its peak."""
    return Item(f"{_label(engine)} engine at its peak", check.need)


def loading_item(engine: InferenceModelConfig, check: Check) -> Item:
    """An engine without a budget's part of a shared device during a weight sync: what it holds throughout and what
    its own part of the sync holds."""
    held = check.estimate.resident + check.estimate.phases.get(SYNC, 0)
    return Item(f"{_label(engine)} engine taking a weight sync", held)


def generate_setup(config: RunConfig, engine: InferenceModelConfig, shape: ModelShape) -> GenerateSetup | None:
    """A `generate` engine's setup from the config, None when its max_model_len is unknown."""
    if engine.max_model_len is None:
        return None
    adapter = None
    if moves_adapter(config):  # the engine applies the adapter itself (peft), in lora_dtype (auto: its own dtype)
        lora = adapter_of(config)
        dtype = engine.dtype if lora.lora_dtype == "auto" else lora.lora_dtype
        adapter = (adapter_params(shape, trained_adapter(config)), dtype)
    return GenerateSetup(
        shape=shape,
        dtype=engine.dtype,
        max_model_len=engine.max_model_len,
        max_tokens=config.model.max_response_tokens or engine.max_model_len,
        sequences=concurrent_sequences(config),
        device_type=config.hardware.device_type,
        adapter=adapter,
        sync=sync_setup(config, shape),
    )


def generate_check(key: str, engine: InferenceModelConfig, setup: GenerateSetup, memory: int, name: str) -> Check:
    """A `generate` engine's memory on its device: the whole model on one device, generate's batch, a weight sync."""
    subject = f"{_label(engine)} engine ({name}, 1 device per engine)"
    return Check(key, f"{key}.engine_type", subject, engine.engine_num, memory, "", generate_estimate(setup))


def _label(engine: InferenceModelConfig) -> str:
    """How the checks name an engine's type (its registry entry's label)."""
    return engines.engine(engine.engine_type).label
