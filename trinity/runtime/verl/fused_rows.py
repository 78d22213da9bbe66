"""verl's fused log-probs (`trainer.use_fused_kernels`) at the rows a batch keeps.

With fused kernels verl replaces the model class's forward (`dense_common.forward_with_torch_backend`, for the torch and
liger backends): it computes the log-probs and the entropy of every token from the last hidden state, 512 rows at a
time, recomputing each chunk's logits in the backward pass, and ignores `logits_to_keep`. An RL batch reads its
responses' log-probs alone (response_logits.py), so the forward here computes those rows only:
- at most one chunk of them (`CHUNK_ROWS`): their logits, plainly, of the order of what the fused kernel holds at once
  (they are kept for the backward pass, about 3 x rows x vocabulary in fp32 with what the log-probs keep, where the
  kernel's backward holds 5-6 chunks' temporaries), and fused they take 1.8x as long (no recomputed logits, no entropy
  unless asked: Qwen2.5-0.5B's vocabulary on 256 rows, fp32 on 2 CPU cores, forward and backward 1.11 s against 2.00 s
  fused, 3.0 s fused on the whole batch's 416 rows);
- more: verl's fused kernel, on the kept rows.
The logits are divided by the temperature in the model's dtype and then made fp32, as the kernel computes them, so both
ways agree in bf16 too. Any other call (no kept positions: an SFT batch, verl's own callers) is verl's forward
unchanged, except on an lm_head that FSDP2 shards as a unit of its own (untied embeddings, as verl wraps them). verl's
kernel reads that head's weight directly, a shard (DTensor) outside its module's forward, and fails ("mixed
torch.Tensor and DTensor"). There the kernel runs as the head module's forward for that one call: FSDP2's hooks around
a module call gather its weight before and reduce its gradient in the backward pass, whatever the forward computes. So
such a head gives every position's log-probs and entropy (an SFT batch's) and more than a chunk of kept rows' as verl's
kernel computes them, holding what it holds.
"""

import inspect

import torch
from torch.distributed.fsdp import FSDPModule
from verl.models.transformers import dense_common
from verl.utils.experimental.torch_functional import FusedLinearForPPO

CHUNK_ROWS = FusedLinearForPPO().chunk_size  # the rows whose logits verl's fused kernel holds at once
_VERLS = dense_common.forward_with_torch_backend
_POSITIONAL = tuple(inspect.signature(_VERLS).parameters)[1:]
_BASE_INPUTS = frozenset(inspect.signature(dense_common.forward_base_model).parameters) - {"self"}


def keep_rows(module: torch.nn.Module) -> None:
    """Where the model class's forward is verl's fused one (torch or liger backend), make it this module's, which keeps
    the rows asked for (a class attribute, as verl's own patch is)."""
    cls = type(module)
    if cls.forward is _VERLS:
        cls.forward = forward_keeping_rows


def keeps_rows(forward) -> bool:
    return forward is forward_keeping_rows


def forward_keeping_rows(self, *args, logits_to_keep: int | torch.Tensor = 0, **inputs):
    """verl's fused forward; with `logits_to_keep` a tensor of sequence positions (every row's, as transformers reads
    it), only those positions': their `logits`, divided by the temperature (at most CHUNK_ROWS in all), or their fused
    `log_probs` and `entropy`. Through a head FSDP2 shards on its own, a call keeping no positions gives every
    position's fused `log_probs` and `entropy`."""
    sharded = isinstance(self.lm_head, FSDPModule)
    keeps = isinstance(logits_to_keep, torch.Tensor)
    if not (keeps or sharded):
        return _VERLS(self, *args, logits_to_keep=logits_to_keep, **inputs)
    inputs |= dict(zip(_POSITIONAL, args, strict=False))  # as verl's forward names them
    hidden = dense_common.forward_base_model(self, **{k: v for k, v in inputs.items() if k in _BASE_INPUTS})[0]
    labels, temperature = _next_tokens(inputs), inputs.get("temperature", 1.0)
    if keeps:
        hidden, labels = hidden[:, logits_to_keep], labels[:, logits_to_keep]
        if labels.numel() <= CHUNK_ROWS:
            logits = self.lm_head(hidden)
            logits = (logits if temperature == 1 else logits / temperature).float()
            return dense_common.CausalLMOutputForPPO(logits=logits)
    fused = FusedLinearForPPO(impl_backend=getattr(self, "_verl_fused_kernels_backend", "torch"))

    def kernel(h: torch.Tensor, y: torch.Tensor):  # the head's weight read inside the call: gathered, where sharded
        return fused(h, self.lm_head.weight, y, temperature)

    log_probs, entropy = _as_forward_of(self.lm_head, kernel, hidden, labels) if sharded else kernel(hidden, labels)
    return dense_common.CausalLMOutputForPPO(log_probs=log_probs, entropy=entropy)


def _as_forward_of(module: torch.nn.Module, compute, *args):
    """`compute(*args)` run as `module`'s forward, for one call: the module's hooks run around it (FSDP2's gather of
    its weight before, and the reduction of the weight's gradient in the backward pass)."""
    module.forward = compute
    try:
        return module(*args)
    finally:
        del module.forward  # the class's forward again


def _next_tokens(inputs: dict) -> torch.Tensor:
    """Each position's next token, as verl's fused forward takes it: the engine's rolled labels, else rolled ones."""
    if inputs.get("shift_labels") is not None:
        return inputs["shift_labels"]
    labels = inputs.get("labels")
    return torch.roll(inputs["input_ids"] if labels is None else labels, shifts=-1, dims=-1)
