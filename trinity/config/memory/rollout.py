"""Rollout memory per device: one vLLM engine, sharded over tensor_parallel x pipeline_parallel devices.

The estimate of every engine whose registry entry says memory="budget" (trinity/config/engines.py).

vLLM takes `gpu_memory_utilization` x device memory (its budget) at start, puts the weights and the
peak activations of a profiling forward pass in it, and gives the rest to the KV cache. It refuses
to start when that rest cannot hold one sequence of `max_model_len` tokens; when it holds fewer
sequences than the explorer sends at once, it queues the others. Sources: vLLM's docs on
`gpu_memory_utilization` and its KV-cache sizing (`determine_available_memory`), verl 0.9.1
`trainer/config/rollout/rollout.yaml` for the engine defaults the estimate assumes.

Per device, with d the dtype's bytes, t = tensor_parallel_size, p = pipeline_parallel_size:
    weights       P x d / (t x p)
    KV cache      2 x (L / p) x ceil(kv_heads / t) x head_dim x d bytes per token
                  (KV heads are replicated when there are fewer than t)
    workspace     one layer's forward over max_num_batched_tokens B: B x d x (2h + (q + 2kv + 2i) / t),
                  plus fp32 logits and probabilities of max_num_seqs S sequences: 8 x S x V
    runtime       DEVICE_RUNTIME (context, graphs, communicators)
Sequences at once: the explorer's runners per engine x repeat_times (each runner asks for
repeat_times samples of one task, or max_repeat_times_per_runner of them: checks.concurrent_sequences), at most
max_num_seqs.

A LoRA run whose engines apply the adapter (synchronizer.lora_sync: adapter) starts vLLM with enable_lora,
max_loras 1 and max_lora_rank R, the adapter's rank rounded up to one vLLM serves (engines.py lora_ranks).
vLLM then replaces every linear layer of the model with a LoRA layer holding A (R x in) and B (out x R) per
slot, in lora_dtype (auto: the model's dtype), whichever modules the adapter adapts: trinity passes no
target modules to vLLM (vLLM `lora/model_manager.py` `_create_lora_modules`, `lora/layers/`):
    adapter slot  d x R x (in + out) per linear and layer (of L / p layers), where a column-parallel linear
                  (q, k, v, gate, up) shards B's out over t and a row-parallel one (o, down) A's in;
                  fully_sharded_loras shards the other matrix over t too. KV heads are replicated as in the
                  KV cache.
vLLM's Qwen2/Qwen3 models name no embedding modules for LoRA, so no vocabulary-sized slot is counted;
the kernels' own buffers (max_num_batched_tokens x R) are under 1 % of the slot and left out.
"""

from math import ceil
from typing import NamedTuple

from .estimate import DEVICE_RUNTIME, DTYPE_BYTES, Estimate, Item
from .lora import ROW_PARALLEL, linear_features
from .shape import ModelShape

MAX_NUM_SEQS = 256  # verl rollout.yaml max_num_seqs (vLLM's default too)
MAX_NUM_BATCHED_TOKENS = 8192  # verl rollout.yaml max_num_batched_tokens


class LoRASlot(NamedTuple):
    """The adapter slot vLLM keeps: its max_lora_rank, lora_dtype, and whether fully_sharded_loras is on."""

    rank: int
    dtype: str
    fully_sharded: bool = False


class EngineSetup(NamedTuple):
    """What decides one engine's memory on one of its devices."""

    shape: ModelShape
    dtype: str
    tensor_parallel: int
    pipeline_parallel: int
    max_model_len: int
    sequences: int  # the explorer sends this many at once
    budget: int  # gpu_memory_utilization x device memory, bytes
    lora: LoRASlot | None = None  # the engine applies a LoRA adapter itself

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes of one token on one device."""
        s, t = self.shape, self.tensor_parallel
        layers = ceil(s.layers / self.pipeline_parallel)
        return 2 * layers * ceil(s.kv_heads / t) * s.head_dim * DTYPE_BYTES[self.dtype]

    @property
    def concurrent(self) -> int:
        """Sequences vLLM runs at once."""
        return min(self.sequences, MAX_NUM_SEQS)


def engine_estimate(setup: EngineSetup) -> Estimate:
    """Weights, workspace, runtime and the KV cache of one full-length sequence, on one device."""
    one_sequence = Item(
        f"KV cache for one sequence of {setup.max_model_len} tokens", setup.max_model_len * setup.kv_bytes_per_token
    )
    return Estimate((*_fixed(setup), one_sequence))


def kv_cache_wanted(setup: EngineSetup) -> int:
    """KV-cache bytes for every sequence vLLM runs at once, each at max_model_len."""
    return setup.concurrent * setup.max_model_len * setup.kv_bytes_per_token


def kv_cache_room(setup: EngineSetup) -> int:
    """What the budget leaves for the KV cache after weights, workspace and runtime."""
    return setup.budget - sum(item.bytes for item in _fixed(setup))


def sequences_that_fit(setup: EngineSetup) -> int:
    """Full-length sequences the KV cache holds at once."""
    return max(0, kv_cache_room(setup) // (setup.max_model_len * setup.kv_bytes_per_token))


def lora_slot_bytes(setup: EngineSetup) -> int:
    """The adapter slot on one device: A and B at max_lora_rank for every linear of the device's layers."""
    slot, shape, t = setup.lora, setup.shape, setup.tensor_parallel
    per_layer = 0
    for name, (inputs, outputs) in linear_features(shape).items():
        if name in ROW_PARALLEL:
            inputs, outputs = ceil(inputs / t), ceil(outputs / t) if slot.fully_sharded else outputs
        else:
            inputs, outputs = ceil(inputs / t) if slot.fully_sharded else inputs, _column_out(shape, name, t)
        per_layer += slot.rank * (inputs + outputs)
    return ceil(shape.layers / setup.pipeline_parallel) * per_layer * DTYPE_BYTES[slot.dtype]


def _column_out(shape: ModelShape, name: str, t: int) -> int:
    """A column-parallel linear's outputs on one device; KV heads are replicated when fewer than the devices."""
    if name in ("k_proj", "v_proj"):
        return ceil(shape.kv_heads / t) * shape.head_dim
    return ceil(linear_features(shape)[name][1] / t)


def _fixed(setup: EngineSetup) -> tuple[Item, ...]:
    return (*_base(setup), *_slot(setup))


def _slot(setup: EngineSetup) -> tuple[Item, ...]:
    if setup.lora is None:
        return ()
    slot, layers = setup.lora, ceil(setup.shape.layers / setup.pipeline_parallel)
    label = f"LoRA adapter slot (max_lora_rank {slot.rank}, {slot.dtype}, every linear of {layers} layers)"
    return (Item(label, lora_slot_bytes(setup)),)


def weights_item(setup: EngineSetup) -> Item:
    """The weights on one of the engine's devices."""
    shards = setup.tensor_parallel * setup.pipeline_parallel
    return Item(f"weights ({setup.dtype}, 1/{shards} shard)", setup.shape.params * DTYPE_BYTES[setup.dtype] // shards)


def _base(setup: EngineSetup) -> tuple[Item, ...]:
    s, d = setup.shape, DTYPE_BYTES[setup.dtype]
    t = setup.tensor_parallel
    per_token = 2 * s.hidden + (s.q_dim + 2 * s.kv_dim + 2 * s.intermediate) // t
    return (
        weights_item(setup),
        Item(
            f"workspace ({MAX_NUM_BATCHED_TOKENS} batched tokens, {MAX_NUM_SEQS} sequences)",
            MAX_NUM_BATCHED_TOKENS * d * per_token + 8 * MAX_NUM_SEQS * s.vocab,
        ),
        Item("device runtime (context, graphs, communicators)", DEVICE_RUNTIME),
    )
