"""Whether the trainer trains its model as it is, without FSDP2: one rank that computes in its weights' dtype.

FSDP2 on one rank shards nothing and, where the trainer computes in the dtype its weights are kept in, casts nothing,
yet copies every weight into a buffer of its own before each unit's forward (and before its backward) and every
gradient into a reduce-scatter buffer and out again. The weights are fp32 (full fine-tuning's masters; LoRA's frozen
base is kept in trainer.param_dtype and its adapter in fp32), so that is a trainer of one rank with param_dtype
float32: the cpu profile's. A narrower param_dtype keeps FSDP2, which casts a unit at a time (autocast would keep a
narrow copy of every weight through the forward). FSDP2's CPU offload policy (trainer.offload_policy) is FSDP2's own,
and verl's activation offload (`enable_activation_offload` in the passthrough's actor or critic model section) groups
activations by FSDP unit. The memory plan (memory/trainer.py) and the trainer rank (runtime/verl/one_rank.py) both
read this.
"""

from typing import Any

from .merge import get_path
from .schema import RunConfig

# where verl reads its activation offload in trainer.trainer_config: the actor's model section (bare, as Trinity-RFT
# writes its sections, or under actor_rollout_ref) and the critic's
ACTIVATION_OFFLOAD = (
    ("model", "enable_activation_offload"),
    ("actor_rollout_ref", "model", "enable_activation_offload"),
    ("critic", "model", "enable_activation_offload"),
)


def trains_unsharded(config: RunConfig) -> bool:
    """The trainer's model is trained without FSDP2 (verl's engine runs it as transformers built it)."""
    return config.cluster.trainer_gpu_num == 1 and only_copies_on_one_rank(config)


def only_copies_on_one_rank(config: RunConfig) -> bool:
    """Whether FSDP2 on one rank of this trainer would only copy: it computes in its weights' dtype, and none of
    FSDP2's own offloads is asked for. Whatever its device count (the memory plan asks for other counts)."""
    trainer = config.trainer
    return (
        trainer.trainer_strategy == "fsdp2"
        and trainer.param_dtype == "float32"
        and not trainer.offload_policy
        and not activation_offload(trainer.trainer_config)
    )


def activation_offload(passthrough: dict[str, Any]) -> bool:
    """Whether trainer.trainer_config turns on verl's activation offload for the actor or the critic."""
    return any(get_path(passthrough, path) for path in ACTIVATION_OFFLOAD)
