"""The forward passes of a train step, before its update: the log-probs of the batch's responses under the reference
model, the actor's own (the old policy, recomputed; with its per-token entropy where the advantage function reads it)
and the distillation teacher's."""

from typing import TYPE_CHECKING

from ...config.algorithms.queries import uses_reference
from ...config.schema import RunConfig
from ..weights import lora

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch
    from tensordict import TensorDict

    from .worker_setup import Workers

KEYS = ("prompts", "responses", "input_ids", "attention_mask", "position_ids", "response_mask")


class LogProbs:
    """Log-probs of a padded batch (batch.padded's columns) at the step's `temperature` (the engines sampled at it)."""

    def __init__(self, config: RunConfig, workers: "Workers", temperature: float) -> None:
        self.config, self.workers, self.temperature = config, workers, temperature
        self.lora = lora.adapter_of(config)
        self._forwarded = False  # whether the actor has run a forward pass with its adapter on

    def reference(self, tensors: dict[str, "torch.Tensor"]) -> "torch.Tensor | None":
        """The reference model's log-probs of the batch (None where the algorithm needs none)."""
        found = self._reference(tensors)
        self._forwarded = True  # the step's update runs the actor with its adapter on, if this did not
        return found

    def actor(self, tensors: dict[str, "torch.Tensor"]) -> "torch.Tensor":
        """The actor's own log-probs: the old policy as the trainer's numerics compute it."""
        return self._of(self.workers.actor.compute_log_prob, tensors)

    def actor_and_entropy(self, tensors: dict[str, "torch.Tensor"]) -> tuple["torch.Tensor", "torch.Tensor"]:
        """The actor's own log-probs and, from the same forward pass, its per-token entropy (verl's, of the
        distribution at the step's temperature): for an advantage function that reads it (Clip_B)."""
        found = self._forward(self.workers.actor.compute_log_prob, tensors, entropy=True)
        return found["log_probs"], found["entropy"]

    def teacher(self, tensors: dict[str, "torch.Tensor"]) -> "torch.Tensor":
        """The distillation teacher's log-probs."""
        return self._of(self.workers.teacher.compute_ref_log_prob, tensors)

    def _reference(self, tensors: dict[str, "torch.Tensor"]) -> "torch.Tensor | None":
        if self.workers.ref is not None:
            return self._of(self.workers.ref.compute_ref_log_prob, tensors)
        if self.lora is None or not uses_reference(self.config.algorithm):
            return None
        if not self._forwarded:  # LoRA: the base model is the adapter switched off
            # FSDP2 sets each group's dtypes at its first forward from the parameters that train then: with the
            # adapter off there are none, and a bf16 base would make the fp32 adapter's gradients bf16
            self.actor(tensors)
        return self._of(self.workers.actor.compute_log_prob, tensors, no_lora_adapter=True)

    def _of(
        self, infer: "Callable[[TensorDict], TensorDict]", tensors: dict[str, "torch.Tensor"], **flags: bool
    ) -> "torch.Tensor":
        """Log-probs of the batch's responses under `infer` (a worker's forward; `flags` are verl's, such as
        no_lora_adapter)."""
        return self._forward(infer, tensors, **flags)["log_probs"]

    def _forward(
        self,
        infer: "Callable[[TensorDict], TensorDict]",
        tensors: dict[str, "torch.Tensor"],
        entropy: bool = False,
        **flags: bool,
    ) -> dict[str, "torch.Tensor"]:
        """The log-probs of the batch's responses under `infer`, and with `entropy` the per-token entropy too, each
        padded as the responses are."""
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu

        from ..verl.repadding import padded_responses
        from ..verl.response_logits import RESPONSES_ONLY
        from ..verl.unpadding import unpadded

        rows = [tensors["input_ids"].shape[0]]
        td = unpadded(TensorDict({k: tensors[k].clone() for k in KEYS}, batch_size=rows))
        flags[RESPONSES_ONLY] = True  # only the responses' are read (padded_responses below)
        tu.assign_non_tensor(td, calculate_entropy=entropy, compute_loss=False, temperature=self.temperature, **flags)
        output = infer(td)
        names = ("log_probs", "entropy") if entropy else ("log_probs",)
        return {name: padded_responses(tu.get(output, name), td).float() for name in names}
