"""Log-probs of the labels from logits, as verl's `logprobs_from_logits` computes them, a block of rows per call.

Where neither of its kernels is in use (flash-attn's cross-entropy, torch_npu's: the CPU, or a GPU without flash-attn),
verl 0.9.1 falls back to `logprobs_from_logits_v2`, which takes the logsumexp (fp32) or log-softmax (bf16) one row at a
time to bound its temporary to one row of the vocabulary. One call per row is the cost on a short batch: the demo's
update asks for about 500 rows, and the loop took 7 of the update's 130 ms (cProfile, 2026-12-07). Here the rows go
`ROW_ELEMENTS` elements of logits at a time (Qwen2.5-0.5B's 151,936-word vocabulary: 110 rows, a 64 MiB fp32
temporary; the demo's: every row at once), computing the same: the label's logit less the logsumexp in fp32 and
fp64, the log-softmax at the label otherwise (every position a row, whatever the shape: verl's loop takes the first
dimension's rows, each whole). Where verl uses a kernel, this is verl's own call. `install` makes it the
FSDP engine's (its own path, every token's log-probs: SFT batches and verl's forward passes); trinity's responses-only
path (response_logits.py) calls it directly.
"""

import os

import torch
import verl.utils.torch_functional as verl_F
from verl.workers.engine.fsdp import transformer_impl

ROW_ELEMENTS = 1 << 24  # logits per call: what the temporary holds


def install() -> None:
    """verl's FSDP engine computes its log-probs with `log_probs` (idempotent)."""
    transformer_impl.logprobs_from_logits = log_probs


def log_probs(logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool = True) -> torch.Tensor:
    """Each position's log-prob of its label (logits: positions... x vocabulary, labels: positions...)."""
    if _verl_uses_a_kernel():
        return verl_F.logprobs_from_logits(logits, labels, inplace_backward=inplace_backward)
    vocabulary = logits.shape[-1]
    # every position a row: blocks of ROW_ELEMENTS logits, whatever the shape
    rows = max(1, ROW_ELEMENTS // max(1, vocabulary))
    flat, at = logits.reshape(-1, vocabulary), labels.reshape(-1)
    blocks = [_block(part, part_at) for part, part_at in zip(flat.split(rows), at.split(rows), strict=True)]
    return torch.cat(blocks).view(labels.shape)


def _block(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    index = labels.unsqueeze(-1)
    if logits.dtype in (torch.float32, torch.float64):
        return logits.gather(-1, index).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    # bf16's logsumexp is not stable enough (verl's reason for its log-softmax there)
    return torch.log_softmax(logits, dim=-1).gather(-1, index).squeeze(-1)


def _verl_uses_a_kernel() -> bool:
    """Whether verl's logprobs_from_logits takes flash-attn's cross-entropy (unless VERL_DISABLE_FLASH_ATTN_CE=1)
    or torch_npu's, not its row-by-row fallback."""
    flash = verl_F.FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE and os.environ.get("VERL_DISABLE_FLASH_ATTN_CE", "0") != "1"
    return bool(flash or verl_F.NPU_CROSS_ENTROPY_LOSS_AVAILABLE)
