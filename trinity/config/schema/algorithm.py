"""`algorithm:` section: the RL algorithm, its loss functions and their arguments, and the optimizer."""

from typing import Any, Literal, Optional

from pydantic import Field, PositiveInt

from ._base import Section

LossAggMode = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


class OptimizerConfig(Section):
    lr: float = Field(1e-6, gt=0, description="Learning rate of the actor.")
    lr_warmup_steps: int = Field(-1, description="Warm-up steps; -1 derives them from lr_warmup_steps_ratio.")
    lr_warmup_steps_ratio: float = Field(0.0, ge=0, le=1, description="Warm-up as a share of total steps.")
    min_lr_ratio: Optional[float] = Field(0.0, ge=0, le=1, description="Floor of the cosine schedule as a share of lr.")
    warmup_style: Literal["constant", "cosine"] = Field("constant", description="Learning-rate schedule after warm-up.")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas.")


class AlgorithmConfig(Section):
    # Upstream's default is 'ppo', which needs a critic model that trinity's runtime does not have yet.
    algorithm_type: str = Field("grpo", description="Algorithm preset (grpo, sft, ...); it fills the loss functions you leave unset.")
    repeat_times: PositiveInt = Field(1, description="Rollouts per task (group size for GRPO).")
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig, description="Actor optimizer.")
    sample_strategy: Optional[str] = Field(None, description="Experience sampling strategy; None is the algorithm's default.")
    advantage_fn: Optional[str] = Field(None, description="Advantage function; None is the algorithm's default.")
    advantage_fn_args: Optional[dict[str, Any]] = Field(None, description="Arguments of the advantage function (checked against it).")
    policy_loss_fn: Optional[str] = Field(None, description="Policy loss; None is the algorithm's default.")
    policy_loss_fn_args: Optional[dict[str, Any]] = Field(None, description="Arguments of the policy loss, e.g. clip_range.")
    kl_loss_fn: Optional[str] = Field(None, description="KL loss against the reference model; None is the algorithm's default, 'none' turns it off.")
    kl_loss_fn_args: Optional[dict[str, Any]] = Field(None, description="Arguments of the KL loss, e.g. kl_coef.")
    entropy_loss_fn: Optional[str] = Field(None, description="Entropy loss; None is the algorithm's default.")
    entropy_loss_fn_args: Optional[dict[str, Any]] = Field(None, description="Arguments of the entropy loss, e.g. entropy_coef.")
    loss_agg_mode: Optional[LossAggMode] = Field(None, description="How token losses are aggregated; None is token-mean.")
