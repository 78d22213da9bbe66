"""Algorithm presets and the loss functions the runtime runs, with the arguments each accepts.

An `algorithm_type` names a preset that fills the functions a user left unset, as Trinity-RFT
does. Each function's arguments are a small model, so a negative clip range or a misspelled
argument is a config error here instead of something verl accepts silently.
"""

from dataclasses import dataclass
from typing import Optional

from pydantic import Field

from .schema._base import Section


class NoArgs(Section):
    """A function that takes no arguments."""


class PPOPolicyLossArgs(Section):
    clip_range: float = Field(0.2, gt=0, description="PPO clip range on both sides.")
    clip_range_low: Optional[float] = Field(None, gt=0, description="Lower clip range; defaults to clip_range.")
    clip_range_high: Optional[float] = Field(None, gt=0, description="Upper clip range; defaults to clip_range.")


class GRPOAdvantageArgs(Section):
    epsilon: float = Field(1e-6, gt=0, description="Added to the group's reward std before dividing.")
    norm_adv_by_std: bool = Field(True, description="Divide by the group's reward std (False: Dr. GRPO).")


class KLLossArgs(Section):
    kl_coef: float = Field(0.001, ge=0, description="Weight of the KL loss.")


class EntropyLossArgs(Section):
    entropy_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")


KL_KINDS = ("k1", "k2", "k3", "low_var_kl", "abs", "mse")

# function kind -> name -> the arguments it takes
FUNCTIONS: dict[str, dict[str, type[Section]]] = {
    "policy_loss_fn": {"ppo": PPOPolicyLossArgs, "sft": NoArgs},
    "advantage_fn": {"grpo": GRPOAdvantageArgs, "none": NoArgs},
    "kl_loss_fn": {"none": NoArgs, **{kind: KLLossArgs for kind in KL_KINDS}},
    "entropy_loss_fn": {"default": EntropyLossArgs, "none": NoArgs},
}


@dataclass(frozen=True)
class Preset:
    """What an algorithm_type fills in; `unsupported` says why the runtime cannot run it yet."""

    functions: dict[str, str]
    unsupported: str = ""
    needs_rollout: bool = True  # False: trains on a data set (SFT), no explorer needed
    critic: bool = False  # trains a value model beside the policy
    loss_agg_mode: str = "token-mean"


ALGORITHMS: dict[str, Preset] = {
    "grpo": Preset({"advantage_fn": "grpo", "policy_loss_fn": "ppo", "kl_loss_fn": "k2", "entropy_loss_fn": "default"}),
    "sft": Preset({"advantage_fn": "none", "policy_loss_fn": "sft", "kl_loss_fn": "none", "entropy_loss_fn": "none"}, needs_rollout=False),
    "ppo": Preset(
        {"advantage_fn": "none", "policy_loss_fn": "ppo", "kl_loss_fn": "k2", "entropy_loss_fn": "default"},
        unsupported="PPO needs a critic model, which trinity's runtime does not have yet",
        critic=True,
    ),
}
