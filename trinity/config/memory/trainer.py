"""Trainer memory per device: verl's FSDP actor (and reference, critic) as verl 0.9.1 runs it.

P parameters, N trainer devices (FSDP shards over all of them: verl's `fsdp_size: -1`), T tokens in
one micro-batch on one device, V vocabulary entries. Sources: verl 0.9.1
`workers/engine/fsdp/transformer_impl.py` (FSDPEngine) and `trainer/config/engine/fsdp.yaml`;
PyTorch's FSDP docs (full shard, MixedPrecision / MixedPrecisionPolicy); Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models" (what a layer keeps for backward).

Held throughout, per device:
    actor weights  4P/N   verl loads a trained model in fp32 (`model_dtype: fp32`) and shards it
    Adam m and v   8P/N   fp32, sharded like the weights
    a critic (PPO) adds the same for the actor's body (no lm_head; its 1-output head is ignored)
    device runtime        DEVICE_RUNTIME
During the actor's update:
    gradients      4P/N   fp32, reduce-scattered after every micro-batch
                          (`use_no_sync_for_gradient_accumulation: false` in fsdp.yaml)
    FSDP working set      bf16 unsharded weights and gradients (2 + 2 bytes) of the root unit
                          (embeddings, final norm, an untied lm_head) and of two decoder layers
                          (the one computing and the one prefetched)
    activations           T x (L x 2h + A + 8h) with gradient checkpointing (each layer keeps its
                          bf16 input; one layer is recomputed at a time), T x (L x A + 8h) without;
                          A = 16h + 4(q + kv) + 8i bytes per token and layer, + 6(q + kv) with
                          q/k norms (Qwen3), i = intermediate. Measured with transformers 5.10 (sdpa,
                          bf16) by counting the tensors autograd saves; tests/config/memory checks it.
    logits                8 bytes x T x V: bf16 logits, their temperature-scaled copy, the entropy's
                          softmax, and their gradient
During the reference model's log-probs (when the algorithm needs one):
    verl forces CPU offload on forward-only models, so its weights live in host memory and only
    its bf16 working set (2 bytes x (root + two layers)), one layer's activations and 4 bytes x
    T x V of logits reach the device. A distillation teacher (model.teacher_model_path) is the same with its own
    shape, at its own time (the teacher's log-probs).

`param_offload` and `optimizer_offload` do not lower this peak: verl moves the weights and the
optimizer state back to the device for each update (`BaseEngineCtx`). They lower what the trainer
holds between updates, which matters when rollout shares the devices (`colocate`).

Tokens per micro-batch: `max_token_len_per_gpu` with dynamic batching (unset: 2 x max_model_len,
as the schema documents); without it, sequences of max_model_len, split over the Ulysses group,
times the micro-batch size. verl has no default micro-batch size (it refuses to start without one);
Trinity-RFT's verl config fills `ppo_micro_batch_size_per_gpu: 1`, and so do we.

LoRA (model.lora_configs; lora.py counts the adapter's Pa parameters): verl loads the frozen base in
trainer.param_dtype (B bytes, `model_dtype`: runtime/verl/config.py) and the adapter trinity initialises in fp32
(runtime/lora.py initial_adapter: in B = bf16, Adam's small steps would round away), so the adapter's gradients
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
                          keeps: per token and layer A - 4h (- 2(q + kv) with q/k norms) + 2r x (adapted linears),
                          the tail 4h (+ 2h + 2r for an adapted lm_head, + 2r for adapted embeddings). The frozen
                          RMSNorms keep no normalized input and a frozen lm_head no input; every adapted linear's
                          input is still kept (lora_A needs it) and its lora_A output (bf16, r wide) too. Measured
                          like A with peft on top (tests/config/memory/test_memory_lora.py): within 3 % for
                          all-linear; an upper bound for fewer modules, whose frozen linears keep no input.
    logits                as above
During the reference log-probs: no reference model. verl computes them with the actor's adapter disabled
(`no_lora_adapter`), so no reference weights exist anywhere; the forward pass brings the actor's B-byte working
set (weights only), one layer's activations and 4 bytes x T x V of logits.
"""

from typing import NamedTuple

from .estimate import DEVICE_RUNTIME, DTYPE_BYTES, Estimate, Item
from .lora import ROOT_MODULES, Adapter, adapter_params, layer_adapter_params, root_adapter_params
from .shape import ModelShape

MICRO_BATCH_SIZE = 1  # Trinity-RFT's ppo_micro_batch_size_per_gpu; verl itself has none
LOGIT_BYTES_TRAIN = 8
LOGIT_BYTES_FORWARD = 4
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
    param_dtype: str = "bfloat16"  # trainer.param_dtype: what a LoRA run keeps its base and adapter in (B bytes)


def trainer_estimate(setup: TrainerSetup) -> Estimate:
    """The trainer's memory on one device."""
    n, actor = setup.devices, setup.actor
    items = _lora_states(setup) if setup.lora else _full_states(actor, n)
    if setup.critic is not None:
        critic = body(setup.critic)
        items += [Item(f"critic weights and Adam moments (fp32, 1/{n} shard)", 12 * critic.params // n)]
        items += _update(critic, setup, CRITIC_UPDATE, logits=False)
    items.append(Item("device runtime (context, collective buffers)", DEVICE_RUNTIME))
    items += _update(actor, setup, UPDATE, logits=True, lora=setup.lora)
    if setup.reference:
        items += _reference(actor, setup)
    if setup.teacher is not None:
        items += _forward_only(setup.teacher, setup, "teacher", TEACHER)
    return Estimate(tuple(items))


def idle_bytes(setup: TrainerSetup) -> int:
    """What the trainer keeps on a device between updates, after the offload flags moved what they move."""
    weights, moments = _kept(setup)
    return (0 if setup.param_offload else weights) + (0 if setup.optimizer_offload else moments) + DEVICE_RUNTIME


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


def activation_bytes_per_layer_token(shape: ModelShape, lora: Adapter | None = None) -> int:
    """A: what one decoder layer keeps for backward per token (bf16, sdpa attention); with LoRA, on a frozen base."""
    attention = shape.q_dim + shape.kv_dim
    full = 16 * shape.hidden + 4 * attention + 8 * shape.intermediate + 6 * attention * shape.qk_norm
    if lora is None:
        return full
    adapted = sum(m not in ROOT_MODULES for m in lora.modules)
    frozen_norms = 4 * shape.hidden + 2 * attention * shape.qk_norm  # their bf16 normalized inputs, 2 bytes each
    return full - frozen_norms + 2 * lora.rank * adapted


def activation_bytes(shape: ModelShape, tokens: int, checkpointing: bool, lora: Adapter | None = None) -> int:
    """What the forward pass keeps for backward for `tokens` tokens."""
    layer = activation_bytes_per_layer_token(shape, lora)
    kept = shape.layers * 2 * shape.hidden + layer if checkpointing else shape.layers * layer
    return tokens * (kept + _tail_bytes(shape, lora))


def _tail_bytes(shape: ModelShape, lora: Adapter | None) -> int:
    """Per token after the layers: the final norm's input and output, the lm_head's input."""
    if lora is None:
        return 8 * shape.hidden
    roots = [m for m in lora.modules if m in ROOT_MODULES]
    return 4 * shape.hidden + 2 * lora.rank * len(roots) + 2 * shape.hidden * ("lm_head" in roots)


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
    n, tokens = setup.devices, setup.tokens
    how = "checkpointed" if setup.checkpointing else "no checkpointing"
    how += f", rank-{lora.rank} LoRA" if lora else ""
    kept = activation_bytes(shape, tokens, setup.checkpointing, lora)
    items = [
        *(_lora_update(setup, phase) if lora else _full_update(shape, n, phase)),
        Item(f"activations ({tokens} tokens, {how})", kept, phase),
    ]
    if logits:
        items.append(
            Item(
                f"logits ({tokens} tokens x {shape.vocab} vocabulary)", LOGIT_BYTES_TRAIN * tokens * shape.vocab, phase
            )
        )
    return items


def _full_update(shape: ModelShape, n: int, phase: str) -> list[Item]:
    return [
        Item(f"gradients (fp32, 1/{n} shard)", 4 * shape.params // n, phase),
        Item("FSDP working set (bf16 weights and gradients of embeddings + 2 layers)", 4 * _unit_params(shape), phase),
    ]


def _lora_update(setup: TrainerSetup, phase: str) -> list[Item]:
    n, b, shape, lora = setup.devices, param_bytes(setup), setup.actor, setup.lora
    adapter = _unit_adapter_params(shape, lora)
    return [
        Item(f"LoRA adapter gradients (fp32, 1/{n} shard)", 4 * adapter_params(shape, lora) // n, phase),
        Item(
            f"FSDP working set ({_short(setup)} weights of embeddings + 2 layers; adapter grads)",
            b * (_unit_params(shape) + 2 * adapter),
            phase,
        ),
    ]


def _reference(shape: ModelShape, setup: TrainerSetup) -> list[Item]:
    if not setup.lora:
        return _forward_only(shape, setup, "reference", REFERENCE)
    working = Item(
        "reference working set (the actor, adapter off; no reference weights)",
        param_bytes(setup) * (_unit_params(shape) + _unit_adapter_params(shape, setup.lora)),
        REFERENCE,
    )
    return [working, *_forward_only(shape, setup, "reference", REFERENCE)[1:]]


def _forward_only(shape: ModelShape, setup: TrainerSetup, name: str, phase: str) -> list[Item]:
    """A model verl runs forward only (the reference, a teacher): its weights offloaded to the host."""
    tokens = setup.tokens
    return [
        Item(f"{name} working set (bf16; its weights stay in host memory)", 2 * _unit_params(shape), phase),
        Item(
            f"{name} activations ({tokens} tokens, one layer at a time)",
            tokens * activation_bytes_per_layer_token(shape),
            phase,
        ),
        Item(f"{name} logits ({tokens} tokens)", LOGIT_BYTES_FORWARD * tokens * shape.vocab, phase),
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
    """B: bytes of one parameter of a LoRA run (trainer.param_dtype)."""
    return DTYPE_BYTES[setup.param_dtype]
