"""The policy losses: one entry each, saying what verl's actor trains on and which loss computes it."""

from dataclasses import dataclass
from typing import Literal

from ..schema._base import Section
from .args import (
    CISPOPolicyLossArgs,
    DPOLossArgs,
    GSPOPolicyLossArgs,
    ImportanceSamplingLossArgs,
    M2POPolicyLossArgs,
    MixChordLossArgs,
    MixLossArgs,
    OPMDPolicyLossArgs,
    PPOPolicyLossArgs,
    RECPolicyLossArgs,
    SAPOPolicyLossArgs,
    SFTLossArgs,
    SFTPhiLossArgs,
    SPPOPolicyLossArgs,
    TOPRPolicyLossArgs,
)
from .own import BY_KEY, OWN, named


@dataclass(frozen=True)
class PolicyLoss:
    """A policy loss: its arguments, what verl's actor trains on, and (for "rl") the loss mode verl's ppo_loss calls.

    batch "mix": an RL batch with samples of an SFT data set among its rows (sample strategy mix), trained by
    `actor_loss`. batch "rl": responses with per-token advantages and the old policy's log-probs, under the sampling
    temperature; verl's `ppo_loss` calls `get_policy_loss_fn(loss_mode)`. batch "sft": packed sequences
    with a loss mask over the responses, trained by verl's `sft_loss`, which reads no loss mode. batch
    "pairs": a chosen and a rejected response in adjacent rows, with the reference model's log-probs
    where an RL batch has the old policy's (DPO has no rollout policy), through verl's `ppo_loss`.
    A loss trinity defines itself lives in `module` and is registered in verl's policy-loss registry under
    `loss_mode` by the trainer, bound to the run's arguments (verl's ppo_loss passes none of its own).
    """

    args: type[Section]
    loss_mode: str | None = None  # a name in verl's policy-loss registry; None only for batch "sft"
    batch: Literal["rl", "sft", "pairs", "mix"] = "rl"
    module: str | None = None  # the trinity module that registers `loss_mode` with verl; None: verl's own
    # a trinity function of `module` that replaces verl's whole actor loss (ppo_loss or sft_loss): for a loss that
    # reads more of the batch than verl hands a policy loss (which rows are SFT samples, the step)
    actor_loss: str | None = None
    # a trinity function of `module` that masks tokens over the whole batch before the update, from the current
    # policy's log-ratio to the rollout's and the advantages (M2PO): the trainer zeroes the masked tokens' advantages,
    # so they add nothing to the loss and still count in its denominator; it needs the rollout's own log-probs
    batch_mask: str | None = None
    # whether the loss multiplies its per-token losses by verl's rollout importance-sampling weights (the batch's
    # rollout_is_weights, algorithm.rollout_correction.rollout_is), as verl's own losses do
    is_weights: bool = False


def _own(args: type[Section], module: str, **kwargs: str) -> PolicyLoss:
    """A loss of trinity's, declared by the algos module `module` under its key's registry name (own.py)."""
    return PolicyLoss(args, BY_KEY, module=OWN + module, **kwargs)


POLICY_LOSSES: dict[str, PolicyLoss] = named(
    {
        "ppo": PolicyLoss(PPOPolicyLossArgs, "vanilla", is_weights=True),
        "sft": PolicyLoss(SFTLossArgs, batch="sft"),
        "gspo": PolicyLoss(GSPOPolicyLossArgs, "gspo", is_weights=True),
        "cispo": PolicyLoss(CISPOPolicyLossArgs, "cispo", is_weights=True),
        "opmd": _own(OPMDPolicyLossArgs, "opmd"),
        "topr": _own(TOPRPolicyLossArgs, "topr"),
        "rec": _own(RECPolicyLossArgs, "rec"),
        "sppo": _own(SPPOPolicyLossArgs, "sppo"),
        "sapo": _own(SAPOPolicyLossArgs, "sapo"),
        "dpo": _own(DPOLossArgs, "dpo", batch="pairs"),
        # -A x ratio on the tokens M2PO's second-moment mask keeps, over the whole batch (its m2po_mask)
        "m2po": _own(M2POPolicyLossArgs, "m2po", batch_mask="m2po_mask"),
        "importance_sampling": _own(ImportanceSamplingLossArgs, "distill"),
        # SFT data mixed into RL batches: verl's PPO loss on the rollouts, an SFT loss on the samples
        "mix": PolicyLoss(MixLossArgs, "vanilla", batch="mix", module=OWN + "mix", actor_loss="mix_loss"),
        "mix_chord": PolicyLoss(MixChordLossArgs, "vanilla", batch="mix", module=OWN + "mix", actor_loss="chord_loss"),
        # SFT with each token's loss weighted by its probability p (sft_is) or by p(1 - p) (sft_phi, CHORD's)
        "sft_is": PolicyLoss(SFTLossArgs, batch="sft", module=OWN + "mix", actor_loss="sft_is_loss"),
        "sft_phi": PolicyLoss(SFTPhiLossArgs, batch="sft", module=OWN + "mix", actor_loss="sft_phi_loss"),
    },
    "loss_mode",
)
