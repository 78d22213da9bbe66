"""`trainer:` section: the verl trainer."""

from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from ._base import Section


class TrainerConfig(Section):
    name: str = Field("trainer", description="Name of the trainer actor.")
    trainer_type: Literal["verl"] = Field("verl", description="Training framework.")
    trainer_strategy: Literal["fsdp", "fsdp2", "megatron"] = Field(
        "fsdp2", description="Parallel training strategy (upstream's default)."
    )
    device: Literal["cuda", "npu", "cpu"] | None = Field(None, description="Derived from the hardware profile.")
    process_group_backend: str | None = Field(
        None, description="Derived: torch.distributed backend string of the FSDP group, e.g. cpu:gloo,npu:hccl."
    )
    attn_implementation: str | None = Field(
        None,
        description="The model's attention kernel (sdpa, eager, flash_attention_2, ...); unset takes the hardware "
        "profile's.",
    )
    param_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="Dtype the trainer computes in (FSDP mixed precision)."
    )
    use_torch_compile: bool | None = Field(
        None, description="torch.compile the actor; unset takes the hardware's default."
    )
    save_interval: NonNegativeInt = Field(0, description="Train steps between checkpoints; 0 saves only at the end.")
    critic_warmup: NonNegativeInt = Field(
        0, description="With a critic (PPO): the actor is updated from this train step on; before it, only the critic."
    )
    total_steps: PositiveInt | None = Field(None, description="Stop training after this many steps.")
    grad_clip: float = Field(
        1.0, gt=0, description="Gradient norm clip; the same value as algorithm.optimizer.clip_grad."
    )
    use_dynamic_bsz: bool = Field(True, description="Pack micro-batches by token count.")
    max_token_len_per_gpu: PositiveInt | None = Field(
        None, description="Token budget per device and micro-batch; defaults to 2 x max_model_len."
    )
    ulysses_sequence_parallel_size: PositiveInt = Field(1, description="Ulysses sequence-parallel degree.")
    use_remove_padding: bool | None = Field(
        None,
        description="Pack a micro-batch's sequences into one row without padding in the actor's forward pass; "
        "default: whether trainer.attn_implementation is one of the hardware profile's facts.varlen_attention (an "
        "implementation without a variable-length kernel attends the packed row with a dense block mask).",
    )
    use_fused_kernels: bool | None = Field(
        None,
        description="verl's fused kernels: log-probs from the last hidden state, the vocabulary's logits never held "
        "whole; default: the hardware profile's facts.fused_kernels.",
    )
    fused_optimizer: bool | None = Field(
        None,
        description="torch's fused optimizer step (`fused=True`) for the actor's and the critic's optimizer; false "
        "leaves torch's own choice; default: the hardware profile's facts.fused_optimizer.",
    )
    param_offload: bool = Field(False, description="Offload FSDP parameters to host memory.")
    optimizer_offload: bool = Field(False, description="Offload optimizer state to host memory.")
    offload_policy: bool = Field(
        False, description="FSDP2's CPU offload policy (parameters, gradients and optimizer on the host)."
    )
    enable_gradient_checkpointing: bool | None = Field(
        None,
        description="Recompute activations in the backward pass; default: the hardware profile's "
        "facts.gradient_checkpointing.",
    )
    save_hf_checkpoint: Literal["last", "always", "never"] = Field(
        "last",
        description="When to also save a Hugging Face checkpoint: last (the stage's last checkpoint only), always, "
        "never.",
    )
    save_merged_model: bool = Field(
        False,
        description="LoRA runs: a Hugging Face checkpoint also holds base + adapter merged (in merged/), a plain "
        "model; the adapter alone is saved either way.",
    )
    balance_batch: bool = Field(
        True,
        description="Deal each train step's batch over the trainer ranks so that each gets about the same work "
        "(verl's sequence-length partitioning of prompt + response tokens; every rank the same number of rows), with "
        "the global_seqlen/* metrics; false: contiguous parts in the buffer's order. A DPO batch is never reordered "
        "(its pairs stay together), as upstream.",
    )
    enable_preview: bool = Field(
        False,
        description="Show each train step's lowest- and highest-reward rollouts (prompt, response, reward) in the "
        "monitor every synchronizer.sync_interval steps: a wandb table, a TensorBoard text summary.",
    )
    save_strategy: Literal["unrestricted"] = Field(
        "unrestricted",
        description="Which checkpoint writers may write at once: every trainer rank its shard together (Trinity-RFT's "
        "unrestricted); the strategies that take turns are not taken.",
    )
    grad_offload: bool = Field(
        False, description="Trinity-RFT's Megatron gradient offload; verl's FSDP engine, which trains here, has none."
    )
    fix_actor_microbatch_loss_scale: bool = Field(
        False,
        description="Trinity-RFT's legacy-verl fix of token-mean across micro-batches; verl 0.9.1's engine always "
        "divides by the whole mini-batch's tokens, which is that fix.",
    )
    max_checkpoints_to_keep: NonNegativeInt = Field(0, description="Checkpoints kept; 0 keeps all.")
    max_actor_ckpt_to_keep: NonNegativeInt | None = Field(
        None, description="Derived from max_checkpoints_to_keep: checkpoints kept, None keeps all."
    )
    trainer_config: dict[str, Any] = Field(
        default_factory=dict,
        description="verl keys passed through (actor_rollout_ref: model, actor, ref, rollout), checked by verl's own "
        "config classes before a run.",
    )
