"""Trainer memory per device: verl's FSDP actor (and reference, critic) as verl 0.9.1 runs it.

P parameters, N trainer devices (FSDP shards over all of them: verl's `fsdp_size: -1`), T tokens in
one micro-batch on one device, V vocabulary entries. Sources: verl 0.9.1
`workers/engine/fsdp/transformer_impl.py` (FSDPEngine) and `trainer/config/engine/fsdp.yaml`;
PyTorch's FSDP docs (full shard, MixedPrecision / MixedPrecisionPolicy); Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models" (what a layer keeps for backward).

The trainer computes in trainer.param_dtype, C bytes a value (FSDP's MixedPrecisionPolicy param_dtype; reductions
and buffers in fp32): bf16 (C = 2) on GPUs and NPUs, fp32 (C = 4) in the cpu profile, where nothing is cast. The B
of a LoRA run below is the same value.

Held throughout, per device:
    actor weights  4P/N   verl loads a trained model in fp32 (`model_dtype: fp32`) and shards it
    Adam m and v   8P/N   fp32, sharded like the weights
    a critic (PPO) adds the same for the actor's body (no lm_head; its 1-output head is ignored)
    runtime               what the process holds there before its first tensor (estimate.py RUNTIMES, by
                          hardware.device_type): a device's context and collective buffers (DEVICE_RUNTIME), or, where
                          the devices are host cores, the process itself (interpreter, torch, verl, Ray's worker)
During the actor's update:
    gradients      4P/N   fp32, reduce-scattered after every micro-batch
                          (`use_no_sync_for_gradient_accumulation: false` in fsdp.yaml); freed after the update
                          (verl's train mode zeroes them on exit: `zero_grad_on_exit`)
    FSDP working set      unsharded weights and gradients (C + C bytes) of the root unit (embeddings, final norm,
                          an untied lm_head) and of two decoder layers (the one computing and the one prefetched).
                          FSDP2 gathers into buffers of their own on one device too; none where the trainer trains
                          its models unsharded (one rank computing in fp32: config/unsharded.py).
    activations           T x (L x Ch + A + 4h + 2Ch) with gradient checkpointing (each layer keeps its input; one
                          layer is recomputed at a time), T x (L x A + 4h + 2Ch) without;
                          A = 8h + 4Ch + 2C(q + kv) + 4Ci bytes per token and layer, + (4 + C)(q + kv) with q/k norms
                          (Qwen3), i = intermediate: each RMSNorm keeps its input in fp32 (4h) and its normalized
                          output (Ch), each projection its input, attention q, k, v and its output, the MLP its gate,
                          up, activation and product. In bf16: 16h + 4(q + kv) + 8i (+ 6(q + kv)); in fp32 the norms'
                          fp32 copy is their input itself: 24h + 8(q + kv) + 16i (+ 8(q + kv)). Measured with
                          transformers 5.10 (sdpa) in both dtypes by counting the tensors autograd saves;
                          tests/config/memory checks it.
    logits                4C bytes x T x V: the logits, their temperature-scaled copy, the entropy's softmax, and
                          their gradient (every token's: a bound; an RL batch's unfused logits are its responses' rows,
                          runtime/verl/response_logits.py)
During a weight sync: what the sync holds at once (sync.py).
During the reference model's log-probs (when the algorithm needs one):
    verl forces CPU offload on forward-only models, so its weights live in host memory and only
    its working set (C bytes x (root + two layers)), one layer's activations and 2C bytes x
    T x V of logits reach the device. A distillation teacher (model.teacher_model_path) is the same with its own
    shape, at its own time (the teacher's log-probs).

Between updates (what a colocated engine finds on the device when it wakes): the weights and Adam moments that are not
offloaded, the runtime, and what the caching allocator keeps after the runtime hands its cached blocks back
(`empty_cache`) before the engines wake (allocator.py).

`param_offload` and `optimizer_offload` do not lower this peak: verl moves the weights and the
optimizer state back to the device for each update (`BaseEngineCtx`). They lower what the trainer
holds between updates, which matters when rollout shares the devices (`colocate`).

Tokens per micro-batch: `max_token_len_per_gpu` with dynamic batching (unset: 2 x max_model_len,
as the schema documents); without it, sequences of max_model_len, split over the Ulysses group,
times the micro-batch size. verl has no default micro-batch size (it refuses to start without one);
Trinity-RFT's verl config fills `ppo_micro_batch_size_per_gpu: 1`, and so do we.

LoRA (model.lora_configs; lora.py counts the adapter's Pa parameters): verl loads the frozen base in
trainer.param_dtype (B bytes, `model_dtype`: runtime/verl/config.py) and the adapter trinity initialises in fp32
(runtime/weights/lora.py initial_adapter: in B = bf16, Adam's small steps would round away), so the adapter's gradients
and AdamW moments are fp32 too. FSDP2 shards each parameter on its own, requires one dtype only among the
trainable ones, and allocates gradients only for those that require one.
Held throughout, per device:
    frozen base weights   B x P/N   no gradients, no optimizer state
    adapter weights       4 x Pa/N
    AdamW m and v         8 x Pa/N
During the actor's update:
    adapter gradients     4 x Pa/N
    FSDP working set      B x (root + two layers, base and adapter) for the weights, B x (their adapter) for
                          the gradients
    activations           as above, less what the frozen weights need no gradient for, plus what the adapter
                          keeps: per token and layer A - 2Ch (- C(q + kv) with q/k norms) + Cr x (adapted linears),
                          the tail 4h (+ Ch + Cr for an adapted lm_head, + Cr for adapted embeddings). The frozen
                          RMSNorms keep no normalized input and a frozen lm_head no input; every adapted linear's
                          input is still kept (lora_A needs it) and its lora_A output (r wide) too. Measured
                          like A with peft on top in bf16 (tests/config/memory/test_memory_lora.py): within 3 % for
                          all-linear; an upper bound for fewer modules, whose frozen linears keep no input.
    logits                as above
During the reference log-probs: no reference model. verl computes them with the actor's adapter disabled
(`no_lora_adapter`), so no reference weights exist anywhere; the forward pass brings the actor's B-byte working
set (weights only), one layer's activations and 4 bytes x T x V of logits.
"""

from typing import NamedTuple

from .allocator import cache_after_empty
from .estimate import DTYPE_BYTES, Estimate, Item, runtime
from .lora import ROOT_MODULES, Adapter, adapter_params, layer_adapter_params, root_adapter_params
from .shape import ModelShape
from .sync import SyncSetup, trainer_sync_items

MICRO_BATCH_SIZE = 1  # Trinity-RFT's ppo_micro_batch_size_per_gpu; verl itself has none
LOGIT_TENSORS_TRAIN = 4  # logits, their temperature-scaled copy, the entropy's softmax, their gradient
LOGIT_TENSORS_FORWARD = 2  # logits and their temperature-scaled copy
SHORT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}  # as the full fine-tuning items write them
UPDATE, CRITIC_UPDATE, REFERENCE, TEACHER = "actor update", "critic update", "reference log-probs", "teacher log-probs"


class TrainerSetup(NamedTuple):
    """What decides the trainer's memory on one device."""

    actor: ModelShape
    devices: int
    tokens: int
    checkpointing: bool = True
    reference: bool = False
    critic: ModelShape | None = None
    teacher: ModelShape | None = None  # a distillation teacher's shape (forward only, like the reference)
    param_offload: bool = False
    optimizer_offload: bool = False
    lora: Adapter | None = None  # the actor trains this adapter on a frozen base
    # trainer.param_dtype: the dtype the trainer computes in (C bytes), and what a LoRA run keeps its base in (B)
    param_dtype: str = "bfloat16"
    device_type: str = "cuda"  # hardware.device_type: which runtime the process holds (estimate.py RUNTIMES)
    sync: SyncSetup | None = None  # the weight sync it sends, where the stage has one
    expandable_segments: bool = False  # its allocator maps device memory in pages (the profiles' *_ALLOC_CONF)
    copies_only: bool = False  # FSDP2 on one device would only copy (config/unsharded.py): one device trains unsharded

    @property
    def unsharded(self) -> bool:
        """Its trained models are not wrapped in FSDP2: no working set."""
        return self.copies_only and self.devices == 1


def trainer_estimate(setup: TrainerSetup) -> Estimate:
    """The trainer's memory on one device."""
    n, actor = setup.devices, setup.actor
    items = _lora_states(setup) if setup.lora else _full_states(actor, n)
    if setup.critic is not None:
        critic = body(setup.critic)
        items += [Item(f"critic weights and Adam moments (fp32, 1/{n} shard)", 12 * critic.params // n)]
        items += _update(critic, setup, CRITIC_UPDATE, logits=False)
    items.append(_runtime(setup))
    items += _update(actor, setup, UPDATE, logits=True, lora=setup.lora)
    if setup.reference:
        items += _reference(actor, setup)
    if setup.teacher is not None:
        items += _forward_only(setup.teacher, setup, "teacher", TEACHER)
    if setup.sync is not None:
        items += trainer_sync_items(setup.sync, runtime(setup.device_type).host)
    return Estimate(tuple(items))


def _runtime(setup: TrainerSetup) -> Item:
    held = runtime(setup.device_type)
    return Item(held.label, held.trainer)


def idle_bytes(setup: TrainerSetup) -> int:
    """What the trainer keeps on a device between updates, after the offload flags moved what they move."""
    weights, moments = _kept(setup)
    held = 0 if setup.param_offload else weights
    return held + (0 if setup.optimizer_offload else moments) + runtime(setup.device_type).trainer


def idle_items(setup: TrainerSetup) -> tuple[Item, ...]:
    """What the trainer holds on a device when the engines sharing it wake (colocate): what it keeps between updates
    and what its allocator still caches after the runtime handed the cached blocks back. A sync's buffers are gone
    by the time the engines' KV cache wakes (checks.py shared_device_check counts them beside the engines'
    weights)."""
    kept = [
        name for name, off in (("weights", setup.param_offload), ("Adam moments", setup.optimizer_offload)) if not off
    ]
    items = [Item(f"trainer between updates ({' and '.join(kept + ['runtime'])})", idle_bytes(setup))]
    units = sum(model.layers + 1 for model in (setup.actor, setup.critic) if model is not None)  # layers and root
    cache = cache_after_empty(units, setup.expandable_segments)
    if not runtime(setup.device_type).host:  # host memory has no caching allocator: freed memory goes back to the heap
        items.append(Item(cache.label, cache.bytes if cache.bounded else trainer_estimate(setup).phases[UPDATE]))
    return tuple(items)


def _kept(setup: TrainerSetup) -> tuple[int, int]:
    """Weights and optimizer moments per device (actor and critic)."""
    n, actor = setup.devices, setup.actor.params
    critic = body(setup.critic).params if setup.critic else 0
    if setup.lora is None:
        return 4 * (actor + critic) // n, 8 * (actor + critic) // n
    b, pa = param_bytes(setup), adapter_params(setup.actor, setup.lora)
    return (b * actor + 4 * pa) // n + 4 * critic // n, 8 * pa // n + 8 * critic // n


def body(shape: ModelShape) -> ModelShape:
    """A critic: the model without its lm_head (counted like a model with tied embeddings)."""
    return shape._replace(tied=True)


def activation_bytes_per_layer_token(shape: ModelShape, lora: Adapter | None = None, compute_bytes: int = 2) -> int:
    """A: what one decoder layer keeps for backward per token (sdpa attention, computing in `compute_bytes` bytes a
    value: bf16 by default); with LoRA, on a frozen base."""
    c, h, attention = compute_bytes, shape.hidden, shape.q_dim + shape.kv_dim
    # two RMSNorms: the fp32 input (4h) and the normalized output; every projection's input; q, k, v and attention's
    # output; the MLP's gate, up, activation and product; q/k norms (Qwen3) like the others, per head
    norms = 2 * (4 * h + c * h) + 2 * c * h
    full = norms + 2 * c * attention + 4 * c * shape.intermediate + (4 + c) * attention * shape.qk_norm
    if lora is None:
        return full
    adapted = sum(m not in ROOT_MODULES for m in lora.modules)
    frozen_norms = 2 * c * h + c * attention * shape.qk_norm  # the normalized outputs only a norm's weight needs
    return full - frozen_norms + c * lora.rank * adapted


def activation_bytes(
    shape: ModelShape, tokens: int, checkpointing: bool, lora: Adapter | None = None, compute_bytes: int = 2
) -> int:
    """What the forward pass keeps for backward for `tokens` tokens."""
    layer = activation_bytes_per_layer_token(shape, lora, compute_bytes)
    kept = shape.layers * compute_bytes * shape.hidden + layer if checkpointing else shape.layers * layer
    return tokens * (kept + _tail_bytes(shape, lora, compute_bytes))


def _tail_bytes(shape: ModelShape, lora: Adapter | None, compute_bytes: int) -> int:
    """Per token after the layers: the final norm's fp32 input and its output, the lm_head's input."""
    c, h = compute_bytes, shape.hidden
    if lora is None:
        return 4 * h + 2 * c * h
    roots = [m for m in lora.modules if m in ROOT_MODULES]
    return 4 * h + c * lora.rank * len(roots) + c * h * ("lm_head" in roots)


def _full_states(actor: ModelShape, n: int) -> list[Item]:
    return [
        Item(f"actor weights (fp32, 1/{n} shard)", 4 * actor.params // n),
        Item(f"actor Adam moments (fp32, 1/{n} shard)", 8 * actor.params // n),
    ]


def _lora_states(setup: TrainerSetup) -> list[Item]:
    n, b, shape, dtype, rank = setup.devices, param_bytes(setup), setup.actor, _short(setup), setup.lora.rank
    pa = adapter_params(shape, setup.lora)
    return [
        Item(f"frozen base weights ({dtype}, 1/{n} shard; no gradients, no Adam moments)", b * shape.params // n),
        Item(f"LoRA adapter weights (rank {rank}, {pa / 1e6:.1f} M parameters, fp32, 1/{n} shard)", 4 * pa // n),
        Item(f"LoRA adapter AdamW moments (fp32, 1/{n} shard)", 8 * pa // n),
    ]


def _update(
    shape: ModelShape, setup: TrainerSetup, phase: str, logits: bool, lora: Adapter | None = None
) -> list[Item]:
    tokens, c = setup.tokens, param_bytes(setup)
    how = "checkpointed" if setup.checkpointing else "no checkpointing"
    how += f", rank-{lora.rank} LoRA" if lora else ""
    kept = activation_bytes(shape, tokens, setup.checkpointing, lora, c)
    items = [
        *(_lora_update(setup, phase) if lora else _full_update(shape, setup, phase)),
        Item(f"activations ({tokens} tokens, {how}, {_short(setup)})", kept, phase),
    ]
    if logits:
        label = f"logits ({tokens} tokens x {shape.vocab} vocabulary, {_short(setup)})"
        items.append(Item(label, LOGIT_TENSORS_TRAIN * c * tokens * shape.vocab, phase))
    return items


def _full_update(shape: ModelShape, setup: TrainerSetup, phase: str) -> list[Item]:
    n, dtype = setup.devices, _short(setup)
    working = Item(
        f"FSDP working set ({dtype} weights and gradients of embeddings + 2 layers)",
        2 * param_bytes(setup) * _unit_params(shape),
        phase,
    )
    return [Item(f"gradients (fp32, 1/{n} shard)", 4 * shape.params // n, phase), *_sharded(setup, working)]


def _lora_update(setup: TrainerSetup, phase: str) -> list[Item]:
    n, b, shape, lora = setup.devices, param_bytes(setup), setup.actor, setup.lora
    adapter = _unit_adapter_params(shape, lora)
    working = Item(
        f"FSDP working set ({_short(setup)} weights of embeddings + 2 layers; adapter grads)",
        b * (_unit_params(shape) + 2 * adapter),
        phase,
    )
    gradients = Item(f"LoRA adapter gradients (fp32, 1/{n} shard)", 4 * adapter_params(shape, lora) // n, phase)
    return [gradients, *_sharded(setup, working)]


def _sharded(setup: TrainerSetup, working: Item) -> list[Item]:
    """FSDP's working set, where the trained models are wrapped in FSDP2 (an unsharded model computes in place)."""
    return [] if setup.unsharded else [working]


def _reference(shape: ModelShape, setup: TrainerSetup) -> list[Item]:
    if not setup.lora:
        return _forward_only(shape, setup, "reference", REFERENCE)
    working = Item(
        "reference working set (the actor, adapter off; no reference weights)",
        param_bytes(setup) * (_unit_params(shape) + _unit_adapter_params(shape, setup.lora)),
        REFERENCE,
    )
    return [*_sharded(setup, working), *_forward_only(shape, setup, "reference", REFERENCE)[1:]]


def _forward_only(shape: ModelShape, setup: TrainerSetup, name: str, phase: str) -> list[Item]:
    """A model verl runs forward only (the reference, a teacher): its weights offloaded to the host."""
    tokens, c, dtype = setup.tokens, param_bytes(setup), _short(setup)
    return [
        Item(f"{name} working set ({dtype}; its weights stay in host memory)", c * _unit_params(shape), phase),
        Item(
            f"{name} activations ({tokens} tokens, one layer at a time)",
            tokens * activation_bytes_per_layer_token(shape, compute_bytes=c),
            phase,
        ),
        Item(f"{name} logits ({tokens} tokens)", LOGIT_TENSORS_FORWARD * c * tokens * shape.vocab, phase),
    ]


def _unit_params(shape: ModelShape) -> int:
    """Parameters FSDP holds unsharded at once: the root unit and two decoder layers."""
    return shape.root_params + 2 * shape.layer_params


def _unit_adapter_params(shape: ModelShape, lora: Adapter) -> int:
    """The adapter's parameters in the root unit and two decoder layers."""
    return root_adapter_params(shape, lora) + 2 * layer_adapter_params(shape, lora)


def _short(setup: TrainerSetup) -> str:
    return SHORT_DTYPES[setup.param_dtype]


def param_bytes(setup: TrainerSetup) -> int:
    """C (B for LoRA): bytes of one value in trainer.param_dtype."""
    return DTYPE_BYTES[setup.param_dtype]
