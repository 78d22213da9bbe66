"""`algorithm:` section: the RL algorithm, its loss functions and their arguments, and the optimizer."""

from typing import Any, Literal

from pydantic import Field, PositiveInt

from ._base import Section

LossAggMode = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
Schedule = Literal["constant", "cosine"]


class OptimizerConfig(Section):
    lr: float = Field(1e-6, gt=0, description="Learning rate of the actor.")
    lr_warmup_steps: int = Field(-1, description="Warm-up steps; -1 derives them from lr_warmup_steps_ratio.")
    lr_warmup_steps_ratio: float = Field(0.0, ge=0, le=1, description="Warm-up as a share of total steps.")
    min_lr_ratio: float = Field(0.01, ge=0, le=1, description="Floor of the cosine schedule as a share of lr.")
    lr_scheduler_type: Schedule = Field(
        "constant", description="Learning-rate schedule after warm-up (the ones verl has)."
    )
    warmup_style: Schedule | None = Field(
        None, description="Deprecated name of lr_scheduler_type (Trinity-RFT still reads it, with a warning)."
    )
    # verl's FSDP optimizer takes a torch.optim class name; Trinity-RFT maps adam and adamw to AdamW, sgd to SGD.
    optimizer_type: Literal["adam", "adamw", "sgd"] = Field(
        "adam", description="Optimizer: adam and adamw are AdamW, sgd is SGD."
    )
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas.")
    clip_grad: float = Field(1.0, gt=0, description="Gradient norm clip (trainer.grad_clip is the same value).")


class RolloutCorrectionConfig(Section):
    """verl's algorithm.rollout_correction (verl/trainer/config/algorithm.py RolloutCorrectionConfig, its YAML's
    defaults): trinity/config/algorithms/rollout_correction.py says what each value means."""

    rollout_is: Literal["token", "sequence"] | None = Field(
        None,
        description="Importance-sampling weights pi_old / pi_rollout on the policy loss: per token, per sequence (the "
        "product of its tokens'), or null (none; the rollout_corr/* metrics alone).",
    )
    rollout_is_threshold: float | str = Field(
        2.0,
        description="A number truncates the IS weights at it (TIS); 'lower_upper' (e.g. '0.5_5.0') zeroes them "
        "outside [lower, upper] (IcePop).",
    )
    rollout_is_batch_normalize: bool = Field(
        False, description="Divide the IS weights by their mean over the batch (per token or per sequence)."
    )
    rollout_rs: str | None = Field(
        None,
        description="Rejection sampling: token_k1..3, seq_sum_k1..3, seq_mean_k1..3, seq_max_k2..3, or several "
        "comma-separated (each must pass); rejected tokens leave the loss. null: none.",
    )
    rollout_rs_threshold: float | str | None = Field(
        None,
        description="Bounds of rollout_rs, one for all options or one each (comma-separated): 'lower_upper' ratio "
        "bounds for k1 (a number u alone: 1/u_u), an upper bound for k2 and k3.",
    )
    bypass_mode: bool | None = Field(
        None,
        description="verl's name of algorithm.bypass_old_logprobs (true: the rollout's log-probs are the old "
        "policy's; false: the trainer recomputes them, which IS and RS need); written, it sets that key. null: "
        "that key's value.",
    )
    loss_type: Literal["ppo_clip", "reinforce"] = Field(
        "ppo_clip",
        description="verl's loss in bypass mode: ppo_clip (the policy loss's clipped ratio against the rollout); "
        "reinforce is not run.",
    )


class AlgorithmConfig(Section):
    # Upstream's default is 'ppo', which trains a critic model beside the policy; GRPO needs none.
    algorithm_type: str = Field(
        "grpo", description="Algorithm preset (grpo, sft, ...); it fills the loss functions you leave unset."
    )
    repeat_times: PositiveInt = Field(1, description="Rollouts per task (group size for GRPO).")
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig, description="Actor optimizer.")
    sample_strategy: str | None = Field(
        None, description="How the trainer takes experiences from the buffer; None is the algorithm's."
    )
    sample_strategy_args: dict[str, Any] | None = Field(
        None, description="Arguments of the sample strategy (checked against it)."
    )
    advantage_fn: str | None = Field(None, description="Advantage function; None is the algorithm's default.")
    advantage_fn_args: dict[str, Any] | None = Field(
        None, description="Arguments of the advantage function (checked against it)."
    )
    policy_loss_fn: str | None = Field(None, description="Policy loss; None is the algorithm's default.")
    policy_loss_fn_args: dict[str, Any] | None = Field(
        None, description="Arguments of the policy loss, e.g. clip_range."
    )
    kl_penalty_fn: str | None = Field(
        None, description="KL penalty subtracted from rewards; None is the algorithm's default ('none')."
    )
    kl_penalty_fn_args: dict[str, Any] | None = Field(None, description="Arguments of the KL penalty, e.g. kl_coef.")
    kl_loss_fn: str | None = Field(
        None, description="KL loss against the reference model; None is the algorithm's default, 'none' turns it off."
    )
    kl_loss_fn_args: dict[str, Any] | None = Field(None, description="Arguments of the KL loss, e.g. kl_coef.")
    entropy_loss_fn: str | None = Field(None, description="Entropy loss; None is the algorithm's default.")
    entropy_loss_fn_args: dict[str, Any] | None = Field(
        None, description="Arguments of the entropy loss, e.g. entropy_coef."
    )
    bypass_old_logprobs: bool = Field(
        True,
        description="Take the rollout engines' log-probs as the old policy's; false recomputes them with the "
        "trainer's weights before each update.",
    )
    loss_agg_mode: LossAggMode | None = Field(None, description="How token losses are aggregated; None is token-mean.")
    rollout_correction: RolloutCorrectionConfig | None = Field(
        None,
        description="Correction of the gap between the rollout engine's log-probs and the trainer's (verl's "
        "rollout_correction): IS weights and rejection sampling; null: none.",
    )
