"""verl's policy engine, computing the vocabulary's logits at the response positions only.

verl 0.9.1's FSDP engine (unfused path) computes the logits and log-probs of every token of a batch, prompts included
(and in padded rows the padding too), though every RL consumer reads the responses' alone (repadding.py:
verl's ppo_loss, trinity's losses and forward passes). The vocabulary is the widest matmul of a small model
(Qwen2.5-0.5B: 151,936 x 896): on the 0.5 B scale benchmark's batch (416 tokens, 256 of them responses) one fp32
forward and backward of the vocabulary took 2.2 s for every row and 1.4 s for the responses' on this 2-core machine
(verl's fused kernel, which computes the logits again in its backward: 3.8 s). The model is asked for the rows the
responses' log-probs come from (transformers' `logits_to_keep`: in a packed batch the positions, in padded rows the
columns from the first response log-prob of any row to the last), and the log-probs (and the entropy, where asked for)
are spread back to verl's packed layout, 0 where nothing reads them.

With fused kernels (`trainer.use_fused_kernels`) the model's forward is verl's, made to keep those rows too
(fused_rows.py): a few rows' logits plainly, more rows' log-probs fused.

A batch asks for this with `RESPONSES_ONLY` (trinity sets it where its consumer reads the responses only: not an SFT
batch, whose loss mask may cover any token). Everything else verl's engine does as it would: a packed sequence padded
to a bucket or split for sequence parallelism, multi-modal inputs, top-k distillation, a micro-batch without a response
token, fused kernels of another forward than verl's generic one (its triton backend, vision-language models), and a
model not of transformers' own classes (a model's own code may read `logits_to_keep` as a count) or whose forward takes
no `logits_to_keep`.
"""

import inspect
from functools import cached_property

import torch
import verl.utils.torch_functional as verl_F
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.workers.engine.fsdp import transformer_impl

from . import fused_rows
from .log_probs import log_probs
from .repadding import response_positions

RESPONSES_ONLY = "trinity_responses_only"  # a batch's flag: its consumer reads the responses' log-probs alone
# output_args: (packed positions, where their logits are in the model's output, their temperatures, the output's width)
_KEEP = "trinity_keep"
# what verl's own path must compute: the flags' defaults are verl's
_VERL_ONLY = {
    "distillation_use_topk": False,
    "distillation_only": False,
    "calculate_sum_pi_squared": False,
}


class ResponseLogitsEngine(transformer_impl.FSDPEngineWithLMHead):
    """verl's FSDP policy engine; a batch flagged RESPONSES_ONLY gets its responses' logits alone."""

    def _build_module(self):
        module = super()._build_module()
        fused_rows.keep_rows(module)  # after verl's patch of the class's forward, where fused kernels made one
        return module

    def prepare_model_inputs(self, micro_batch: TensorDict):
        model_inputs, output_args = super().prepare_model_inputs(micro_batch)
        kept = self._kept_rows(micro_batch, output_args) if self._responses_only(micro_batch, output_args) else None
        if kept is not None:  # None: verl's way (a micro-batch without a response token too)
            model_inputs["logits_to_keep"], output_args[_KEEP] = kept
        return model_inputs, output_args

    def _kept_rows(self, micro_batch: TensorDict, output_args: dict) -> tuple | None:
        """What the model is asked to keep, and (the packed positions, where their logits are in its output, their
        temperatures)."""
        packed, rows, columns = response_positions(micro_batch)
        if not len(packed):
            return None
        if "temperature_rmpad" in output_args:  # packed: one row of every token, the responses' asked for
            return packed, (packed, 0, output_args["temperature_rmpad"][packed], len(packed))
        low = int(columns.min())  # padded rows: the columns any response spans, then each row's own
        keep = torch.arange(low, int(columns.max()) + 1, device=packed.device)
        return keep, (packed, (rows, columns - low), output_args["temperature"][rows], len(keep))

    def prepare_model_outputs(self, output, output_args, micro_batch: TensorDict, logits_processor_func):
        if _KEEP not in output_args:
            return super().prepare_model_outputs(output, output_args, micro_batch, logits_processor_func)
        packed, picks, temperature, width = output_args[_KEEP]
        entropy = tu.get_non_tensor_data(data=micro_batch, key="calculate_entropy", default=False)
        fused = tu.get_non_tensor_data(data=micro_batch, key="use_fused_kernels", default=False)
        labels = output_args["input_ids_rmpad_rolled"]
        _check_kept(output.log_probs if output.logits is None else output.logits, width)
        if output.logits is None:  # fused at the kept rows (fused_rows.py), the temperature applied there
            found = {"log_probs": output.log_probs[picks]} | ({"entropy": output.entropy[picks]} if entropy else {})
        else:
            logits = output.logits[picks]
            if not fused:  # fused_rows.py's logits are divided by the temperature already
                logits = transformer_impl._scale_logits_by_temperature(
                    logits,
                    temperature.unsqueeze(-1),
                    is_unit_temperature=output_args.get("temperature_is_one", False),
                )
            found = {"log_probs": log_probs(logits, labels[packed], inplace_backward=not entropy)}
            if entropy:
                found["entropy"] = self._entropy(logits, packed="temperature_rmpad" in output_args)
        offsets = micro_batch["input_ids"].offsets()
        return {  # verl's packed layout: 0 where no response is
            name: torch.nested.nested_tensor_from_jagged(
                values.new_zeros(labels.shape[0]).index_copy(0, packed, values), offsets
            )
            for name, values in found.items()
        }

    def _entropy(self, logits: torch.Tensor, packed: bool) -> torch.Tensor:
        """Each row's entropy, as verl's engine computes it for the batch's layout (packed: its compiled or chunked
        function; padded rows: the plain one), checkpointed where it checkpoints."""
        config = self.engine_config
        if packed and config.entropy_from_logits_with_chunking and not config.entropy_checkpointing:
            return self.compute_entropy_from_logits(logits, chunk_size=config.entropy_from_logits_chunk_size)
        compute = self.compute_entropy_from_logits if packed else verl_F.entropy_from_logits
        if config.entropy_checkpointing:
            return torch.utils.checkpoint.checkpoint(compute, logits, use_reentrant=False)
        return compute(logits)

    def _responses_only(self, micro_batch: TensorDict, output_args: dict) -> bool:
        flags = {key: tu.get_non_tensor_data(data=micro_batch, key=key, default=d) for key, d in _VERL_ONLY.items()}
        fused = tu.get_non_tensor_data(data=micro_batch, key="use_fused_kernels", default=False)
        return (
            tu.get_non_tensor_data(data=micro_batch, key=RESPONSES_ONLY, default=False)
            and flags == _VERL_ONLY
            and not output_args.get("pad_size")  # a packed sequence padded to a bucket or for sequence parallelism
            and not self.use_ulysses_sp
            and "multi_modal_inputs" not in micro_batch.keys()
            and self._keeps_logits[bool(fused)]
        )

    @cached_property
    def _keeps_logits(self) -> tuple[bool, bool]:
        """Whether the model keeps the rows asked for: (unfused, fused). It does not change: asked once."""
        forward = type(_model(self.module)).forward
        return _transformers_keeps_logits(forward), fused_rows.keeps_rows(forward)


def _check_kept(output: torch.Tensor, width: int) -> None:
    """A model asked for `width` positions a row that returned another count (its class's forward patched again after
    trinity's, so that it ignores `logits_to_keep`) would be read at the wrong positions: refused instead."""
    if output.shape[1] != width:
        raise RuntimeError(
            f"the model returned {output.shape[1]} positions a row where {width} were asked for (logits_to_keep): its "
            "forward is no longer one that keeps them (was its class's forward patched again?)"
        )


def _model(module: torch.nn.Module) -> torch.nn.Module:
    """The language model under FSDP1's wrapper or PEFT's (each passes `logits_to_keep` on)."""
    while hasattr(module, "_fsdp_wrapped_module"):
        module = module._fsdp_wrapped_module
    return module.get_base_model() if hasattr(module, "get_base_model") else module


def _transformers_keeps_logits(forward) -> bool:
    """Whether the forward is one of transformers' own models' and takes `logits_to_keep` as the positions to keep (a
    model's own code may read it as a count)."""
    return forward.__module__.startswith("transformers.") and "logits_to_keep" in inspect.signature(forward).parameters
