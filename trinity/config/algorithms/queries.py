"""The questions other layers ask of the tables, one function per question, so that each has one answer.

The stage loop, the derivation rules, the memory estimate and the trainer ask here (does an algorithm read
rollouts, does a loss train on advantages, does the trainer need a reference, a teacher, a critic) instead of
reading the entries' fields themselves.
"""

from typing import Any

from .advantages import ADVANTAGES
from .args import KLArgs
from .losses import POLICY_LOSSES
from .presets import ALGORITHMS


def needs_rollout(algorithm_type: str | None) -> bool:
    """Whether `algorithm_type` trains on experiences the explorer generates (False: on a data set, with no explorer).

    The one answer for every consumer (the stage loop, sync and buffer rules, local input checks). A name
    that is not an algorithm counts as one that does, as the algorithm_preset rule refuses it anyway.
    """
    return data_kind(algorithm_type) == "rollouts"


def data_kind(algorithm_type: str | None) -> str:
    """What the trainer of `algorithm_type` reads: rollouts, or a data set of sft samples, pairs or text."""
    preset = ALGORITHMS.get(algorithm_type)
    return "rollouts" if preset is None else preset.data


def is_rl_loss(policy_loss_fn: str | None) -> bool:
    """Whether the policy loss trains on sampled responses with advantages, under the sampling temperature
    (False: a likelihood loss on given tokens, SFT). An unknown name counts as RL, as it is refused anyway."""
    loss = POLICY_LOSSES.get(policy_loss_fn)
    return loss is None or loss.batch in ("rl", "mix")


def uses_reference(algorithm: Any) -> bool:
    """Whether the trainer needs the reference model's log-probs: for a KL loss, a KL penalty in the reward, or a
    loss on pairs (DPO's implicit reward is the log-ratio to the reference)."""
    pairs = getattr(POLICY_LOSSES.get(algorithm.policy_loss_fn), "batch", None) == "pairs"
    return pairs or any(name not in (None, "none") for name in (algorithm.kl_loss_fn, algorithm.kl_penalty_fn))


def kl_penalty_coef(algorithm: Any) -> float:
    """The weight of the KL penalty subtracted from token rewards (0 when there is none)."""
    if algorithm.kl_penalty_fn in (None, "none"):
        return 0.0
    return (algorithm.kl_penalty_fn_args or {}).get("kl_coef", KLArgs().kl_coef)


def fits_loss(advantage_fn: str, policy_loss_fn: str) -> bool:
    """Whether an advantage function gives what a policy loss reads: an RL loss trains on advantages; an SFT loss
    reads none, or a selection of the rollouts it trains on (RAFT)."""
    entry = ADVANTAGES[advantage_fn]
    if is_rl_loss(policy_loss_fn):
        return entry.estimator is not None and not entry.selects
    return entry.estimator is None or entry.selects


def uses_greedy_baseline(advantage_fn: str | None) -> bool:
    """Whether the explorer also makes one greedy rollout of each training task, whose reward the advantage reads."""
    entry = ADVANTAGES.get(advantage_fn)
    return entry is not None and entry.greedy_baseline


def uses_teacher(advantage_fn: str | None) -> bool:
    """Whether the trainer computes a teacher model's log-probs (model.teacher_model_path): the advantage reads them."""
    entry = ADVANTAGES.get(advantage_fn)
    return entry is not None and entry.teacher


def uses_critic(advantage_fn: str | None) -> bool:
    """Whether the trainer trains a critic (value) model: the advantage function reads its values."""
    entry = ADVANTAGES.get(advantage_fn)
    return entry is not None and entry.critic


def uses_entropy(advantage_fn: str | None) -> bool:
    """Whether the trainer computes the actor's per-token entropy of each response before the advantages (in its
    old-policy forward pass): the advantage function reads it (Clip_B)."""
    entry = ADVANTAGES.get(advantage_fn)
    return entry is not None and entry.entropy


def masks_tokens(advantage_fn: str | None) -> bool:
    """Whether the advantage function also takes tokens out of the loss (its response mask) over the whole batch."""
    entry = ADVANTAGES.get(advantage_fn)
    return entry is not None and entry.token_mask is not None


def reads_old_policy_before_update(algorithm: Any) -> bool:
    """Whether a train step reads the old policy's log-probs before its update: a KL penalty in the reward, the
    rollout correction, the actor's entropy (Clip_B), a teacher's advantage (distillation), a batch-masked loss (M2PO).
    Where none does, the update's own forward pass gives them (trainer/old_policy.py)."""
    loss = POLICY_LOSSES.get(algorithm.policy_loss_fn)
    return (
        algorithm.kl_penalty_fn not in (None, "none")
        or algorithm.rollout_correction is not None
        or uses_entropy(algorithm.advantage_fn)
        or uses_teacher(algorithm.advantage_fn)
        or (loss is not None and loss.batch_mask is not None)
    )
