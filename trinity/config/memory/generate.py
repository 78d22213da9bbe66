"""Rollout memory per device of an engine that runs Hugging Face `generate` (the transformers engine): one device
per engine, the whole model on it.

The estimate of every engine whose registry entry says memory="generate" (trinity/config/engines.py). Unlike vLLM it
takes no budget at start: it holds its weights and, while it generates, what `generate` allocates for the batch
(runtime/rollout/transformers_engine.py). S sequences at once: the explorer's runners per engine x repeat_times (each
runner asks for repeat_times samples of one task, or max_repeat_times_per_runner of them: checks.concurrent_sequences,
and the engine generates what has arrived together), at most
MAX_SEQUENCES a `generate` call; T = max_response_tokens (else max_model_len), L_ctx = max_model_len, d the rollout
dtype's bytes:
    runtime       what the process holds there before its first tensor (estimate.py RUNTIMES)
    weights       P x d (an adapter the engine applies itself: its parameters in lora_dtype)
    KV cache      S x L_ctx x 2 x L x kv_heads x head_dim x d: generate's DynamicCache grows to the longest row
    scores        S x V x T x 4: the processed scores of every step, fp32 (output_scores: the engine takes the
                  sampled tokens' log-probs from them once the batch is done)
    logits        S x V x (d + 3 x 4) of one step: the model's last-position logits, generate's fp32 copy of them,
                  the processed scores and the sampling probabilities
    weight sync   what a sync holds at once (sync.py), in a phase of its own
Not counted: one layer's activations of the prefill (S x prompt tokens x (2h + q + 2kv + 2i) x d: 5 MB for 16
prompts of 6 tokens of a 0.5B model), and an attention kernel that materialises the prefill's scores (sdpa's math
path: S x heads x prompt^2 x d).

Checked against a whole run on the CPU (benchmarks/scale.py: the table in docs/config.md): the peak of a 0.5B
engine is its sync's, not generate's.
"""

from typing import NamedTuple

from .estimate import DTYPE_BYTES, Estimate, Item, runtime
from .shape import ModelShape
from .sync import SyncSetup, engine_sync_items

MAX_SEQUENCES = 512  # runtime/rollout/transformers_engine.py: rows per generate call
SCORE_BYTES = 4  # generate keeps its scores in fp32 whatever the model's dtype
GENERATE = "generate"


class GenerateSetup(NamedTuple):
    """What decides one transformers engine's memory on its device."""

    shape: ModelShape
    dtype: str  # explorer.rollout_model.dtype
    max_model_len: int
    max_tokens: int  # longest response
    sequences: int  # the explorer sends this many at once
    device_type: str = "cuda"  # hardware.device_type (estimate.py RUNTIMES)
    adapter: tuple[int, str] | None = None  # (parameters, lora dtype) of an adapter the engine applies itself
    sync: SyncSetup | None = None  # the weight sync it receives, where the stage has one

    @property
    def concurrent(self) -> int:
        """Sequences one generate call runs at once."""
        return min(self.sequences, MAX_SEQUENCES)

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes of one token."""
        s = self.shape
        return 2 * s.layers * s.kv_heads * s.head_dim * DTYPE_BYTES[self.dtype]


def generate_estimate(setup: GenerateSetup) -> Estimate:
    """The engine's memory on its device: runtime and weights throughout, then generate's batch or a weight sync."""
    d, s, rows = DTYPE_BYTES[setup.dtype], setup.shape, setup.concurrent
    held = runtime(setup.device_type)
    items = [Item(held.label, held.engine), Item(f"weights ({setup.dtype})", s.params * d)]
    if setup.adapter is not None:
        params, dtype = setup.adapter
        items.append(Item(f"LoRA adapter ({params / 1e6:.1f} M parameters, {dtype})", params * DTYPE_BYTES[dtype]))
    items += [
        Item(
            f"KV cache ({rows} sequences of {setup.max_model_len} tokens)",
            rows * setup.max_model_len * setup.kv_bytes_per_token,
            GENERATE,
        ),
        Item(
            f"scores ({rows} sequences x {setup.max_tokens} tokens x {s.vocab} vocabulary, fp32)",
            rows * s.vocab * setup.max_tokens * SCORE_BYTES,
            GENERATE,
        ),
        Item(f"one step's logits and sampling ({rows} sequences)", rows * s.vocab * (d + 3 * SCORE_BYTES), GENERATE),
    ]
    if setup.sync is not None:
        items += engine_sync_items(setup.sync, held.host)
    return Estimate(tuple(items))
