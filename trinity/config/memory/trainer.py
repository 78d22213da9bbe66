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
    T x V of logits reach the device.

`param_offload` and `optimizer_offload` do not lower this peak: verl moves the weights and the
optimizer state back to the device for each update (`BaseEngineCtx`). They lower what the trainer
holds between updates, which matters when rollout shares the devices (`colocate`).

Tokens per micro-batch: `max_token_len_per_gpu` with dynamic batching (unset: 2 x max_model_len,
as the schema documents); without it, sequences of max_model_len, split over the Ulysses group,
times the micro-batch size. verl has no default micro-batch size (it refuses to start without one);
Trinity-RFT's verl config fills `ppo_micro_batch_size_per_gpu: 1`, and so do we.
"""

from typing import NamedTuple

from .estimate import DEVICE_RUNTIME, Estimate, Item
from .shape import ModelShape

MICRO_BATCH_SIZE = 1  # Trinity-RFT's ppo_micro_batch_size_per_gpu; verl itself has none
LOGIT_BYTES_TRAIN = 8
LOGIT_BYTES_FORWARD = 4
UPDATE, CRITIC_UPDATE, REFERENCE = "actor update", "critic update", "reference log-probs"


class TrainerSetup(NamedTuple):
    """What decides the trainer's memory on one device."""

    actor: ModelShape
    devices: int
    tokens: int
    checkpointing: bool = True
    reference: bool = False
    critic: ModelShape | None = None
    param_offload: bool = False
    optimizer_offload: bool = False


def trainer_estimate(setup: TrainerSetup) -> Estimate:
    """The trainer's memory on one device."""
    n, actor = setup.devices, setup.actor
    items = [
        Item(f"actor weights (fp32, 1/{n} shard)", 4 * actor.params // n),
        Item(f"actor Adam moments (fp32, 1/{n} shard)", 8 * actor.params // n),
    ]
    if setup.critic is not None:
        critic = body(setup.critic)
        items += [Item(f"critic weights and Adam moments (fp32, 1/{n} shard)", 12 * critic.params // n)]
        items += _update(critic, setup, CRITIC_UPDATE, logits=False)
    items.append(Item("device runtime (context, collective buffers)", DEVICE_RUNTIME))
    items += _update(actor, setup, UPDATE, logits=True)
    if setup.reference:
        items += _reference(actor, setup.tokens)
    return Estimate(tuple(items))


def idle_bytes(setup: TrainerSetup) -> int:
    """What the trainer keeps on a device between updates, after the offload flags moved what they move."""
    params = setup.actor.params + (body(setup.critic).params if setup.critic else 0)
    weights = 0 if setup.param_offload else 4 * params // setup.devices
    moments = 0 if setup.optimizer_offload else 8 * params // setup.devices
    return weights + moments + DEVICE_RUNTIME


def body(shape: ModelShape) -> ModelShape:
    """A critic: the model without its lm_head (counted like a model with tied embeddings)."""
    return shape._replace(tied=True)


def activation_bytes_per_layer_token(shape: ModelShape) -> int:
    """A: what one decoder layer keeps for backward per token (bf16, sdpa attention)."""
    attention = shape.q_dim + shape.kv_dim
    return 16 * shape.hidden + 4 * attention + 8 * shape.intermediate + 6 * attention * shape.qk_norm


def activation_bytes(shape: ModelShape, tokens: int, checkpointing: bool) -> int:
    """What the forward pass keeps for backward for `tokens` tokens."""
    layer = activation_bytes_per_layer_token(shape)
    tail = 8 * shape.hidden  # final norm and lm_head input
    kept = shape.layers * 2 * shape.hidden + layer if checkpointing else shape.layers * layer
    return tokens * (kept + tail)


def _update(shape: ModelShape, setup: TrainerSetup, phase: str, logits: bool) -> list[Item]:
    n, tokens = setup.devices, setup.tokens
    how = "checkpointed" if setup.checkpointing else "no checkpointing"
    items = [
        Item(f"gradients (fp32, 1/{n} shard)", 4 * shape.params // n, phase),
        Item("FSDP working set (bf16 weights and gradients of embeddings + 2 layers)", 4 * _unit_params(shape), phase),
        Item(f"activations ({tokens} tokens, {how})", activation_bytes(shape, tokens, setup.checkpointing), phase),
    ]
    if logits:
        items.append(
            Item(
                f"logits ({tokens} tokens x {shape.vocab} vocabulary)", LOGIT_BYTES_TRAIN * tokens * shape.vocab, phase
            )
        )
    return items


def _reference(shape: ModelShape, tokens: int) -> list[Item]:
    return [
        Item("reference working set (bf16; its weights stay in host memory)", 2 * _unit_params(shape), REFERENCE),
        Item(
            f"reference activations ({tokens} tokens, one layer at a time)",
            tokens * activation_bytes_per_layer_token(shape),
            REFERENCE,
        ),
        Item(f"reference logits ({tokens} tokens)", LOGIT_BYTES_FORWARD * tokens * shape.vocab, REFERENCE),
    ]


def _unit_params(shape: ModelShape) -> int:
    """Parameters FSDP holds unsharded at once: the root unit and two decoder layers."""
    return shape.root_params + 2 * shape.layer_params
