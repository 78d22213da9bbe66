"""`algorithm:` section: the RL algorithm and its optimizer."""

from typing import Literal, Optional

from pydantic import Field, PositiveInt

from ._base import Section


class OptimizerConfig(Section):
    lr: float = Field(1e-6, gt=0, description="Learning rate of the actor.")
    lr_warmup_steps: int = Field(-1, description="Warm-up steps; -1 derives them from lr_warmup_steps_ratio.")
    lr_warmup_steps_ratio: float = Field(0.0, ge=0, le=1, description="Warm-up as a share of total steps.")
    min_lr_ratio: Optional[float] = Field(0.0, ge=0, le=1, description="Floor of the cosine schedule as a share of lr.")
    warmup_style: Literal["constant", "cosine"] = Field("constant", description="Learning-rate schedule after warm-up.")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas.")


class AlgorithmConfig(Section):
    algorithm_type: str = Field("ppo", description="Algorithm name as registered upstream (ppo, grpo, sft, dpo, ...).")
    repeat_times: PositiveInt = Field(1, description="Rollouts per task (group size for GRPO).")
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig, description="Actor optimizer.")
    sample_strategy: Optional[str] = Field(None, description="Experience sampling strategy; None is the algorithm's default.")
    advantage_fn: Optional[str] = Field(None, description="Advantage function; None is the algorithm's default.")
    kl_loss_fn: Optional[str] = Field(None, description="KL loss; None is the algorithm's default.")
    entropy_loss_fn: Optional[str] = Field(None, description="Entropy loss; None is the algorithm's default.")
