"""The arguments each algorithm function accepts, one small model per function.

A negative clip range or a misspelled argument is a config error here instead of something verl accepts
silently. An argument upstream has that the runtime cannot honour accepts only upstream's default
(`ONLY_DEFAULT` ends its description; derive/algorithm.py words the refusal from it).
"""

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from ..schema._base import Section
from ..schema.algorithm import LossAggMode

ONLY_DEFAULT = "; only Trinity-RFT's default is supported yet"


class _Args(Section):
    # built on first use: a run validates the arguments of its own functions, not of all the ones there are
    model_config = ConfigDict(defer_build=True)


class NoArgs(_Args):
    """A function that takes no arguments."""


class _AggArgs(_Args):
    # Upstream lists loss_agg_mode among a policy loss's arguments and overwrites it with algorithm.loss_agg_mode.
    loss_agg_mode: LossAggMode | None = Field(
        None, description="Filled from algorithm.loss_agg_mode, as upstream does."
    )


class SFTLossArgs(_AggArgs):
    pass


class ImportanceSamplingLossArgs(_AggArgs):
    pass


class SFTPhiLossArgs(_AggArgs):
    cutoff_prob: float = Field(1.0, ge=0, le=1, description="Log-probs are clamped at log(cutoff_prob) (1: no clamp).")


class PPOPolicyLossArgs(_AggArgs):
    clip_range: float = Field(0.2, gt=0, description="PPO clip range on both sides.")
    clip_range_low: float | None = Field(None, gt=0, description="Lower clip range; defaults to clip_range.")
    clip_range_high: float | None = Field(None, gt=0, description="Upper clip range; defaults to clip_range.")
    clip_ratio_c: float = Field(3.0, gt=1, description="Dual-clip bound for negative advantages.")
    enable_sequence_masking: Literal[False] = Field(False, description="DeepSeek-V3.2 sequence masking" + ONLY_DEFAULT)
    delta_sequence_masking: float = Field(0.1, description="KL threshold of sequence masking (unused while it is off).")
    fallback_to_policy_gradient: Literal[False] = Field(
        False, description="Ignore the old policy's log-probs" + ONLY_DEFAULT
    )


class GSPOPolicyLossArgs(_AggArgs):
    clip_range: float | None = Field(None, gt=0, description="Clip range on both sides of the sequence ratio.")
    clip_range_low: float | None = Field(0.0003, gt=0, description="Lower clip range; defaults to clip_range.")
    clip_range_high: float | None = Field(0.0004, gt=0, description="Upper clip range; defaults to clip_range.")


class M2POPolicyLossArgs(_Args):
    m2_threshold: float = Field(
        0.04,
        ge=0,
        allow_inf_nan=False,
        description="Bound on the mean squared log-ratio of the trust-region tokens: the largest are masked until "
        "the rest are within it.",
    )
    log_ratio_clip: float = Field(
        20.0,
        gt=0,
        allow_inf_nan=False,
        description="The log-ratio is clamped to +-this in the ratio (not its gradient).",
    )
    loss_agg_mode: Literal["token-mean"] | None = Field(
        None, description="M2PO normalises over every valid token of the batch: token-mean only, as Trinity-RFT's."
    )


class CISPOPolicyLossArgs(_AggArgs):
    clip_range_low: float = Field(1.0, gt=0, description="Lower clip of the importance weight.")
    clip_range_high: float = Field(0.28, gt=0, description="Upper clip of the importance weight.")
    enable_mask_clip: Literal[False] = Field(
        False, description="Mask tokens whose ratio leaves the mask range" + ONLY_DEFAULT
    )
    mask_clip_range_low: float = Field(1.0, description="Lower mask range (unused while enable_mask_clip is off).")
    mask_clip_range_high: float = Field(0.28, description="Upper mask range (unused while enable_mask_clip is off).")


class StalenessArgs(_Args):
    max_staleness: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="Experiences made by weights more than this many train steps older than the trainer's are "
        "dropped, never trained on (None: no limit, Trinity-RFT's inf).",
    )


class MixSampleArgs(_Args):
    expert_data_ratio: float = Field(
        0.5, ge=0, lt=1, description="Share of each train batch taken from the SFT data set (rounded up)."
    )
    sft_dataset_name: str = Field(
        "sft_dataset", min_length=1, description="Name of the SFT data set in buffer.trainer_input.auxiliary_buffers."
    )


class GRPOAdvantageArgs(_Args):
    epsilon: float = Field(1e-6, gt=0, description="Added to the group's reward std before dividing.")
    norm_adv_by_std: bool = Field(
        True, description="Divide by the group's reward std (False: Dr. GRPO; trinity's addition)."
    )
    std_threshold: float | None = Field(
        None,
        ge=0,
        description="Drop the groups whose reward std is at or below it (DAPO's dynamic sampling); None keeps all.",
    )
    duplicate_experiences: bool = Field(
        False, description="Refill the batch with copies of kept groups for those dropped (needs std_threshold)."
    )
    rank_penalty: Literal[None] | None = Field(None, description="Rank-based reward correction" + ONLY_DEFAULT)
    std_cal_level: Literal["group"] = Field("group", description="Where the std is taken" + ONLY_DEFAULT)

    @model_validator(mode="after")
    def _refill_needs_a_threshold(self) -> "GRPOAdvantageArgs":
        if self.duplicate_experiences and self.std_threshold is None:
            raise ValueError("duplicate_experiences refills the groups std_threshold drops; set std_threshold")
        return self


class ClipBAdvantageArgs(_Args):
    epsilon: float = Field(1e-6, gt=0, description="Added to the group's reward std before dividing (GRPO's).")
    mu: float = Field(
        2.5,
        ge=0,
        allow_inf_nan=False,
        description="A negative-advantage token leaves the loss where its entropy signal p(H + log p) falls more "
        "than mu standard deviations below the batch's mean.",
    )


class StepWiseGRPOAdvantageArgs(_Args):
    epsilon: float = Field(1e-6, gt=0, description="Added to the reward std before dividing.")
    enable_step_norm: bool = Field(
        False, description="Divide each episode's advantage by its number of turns (its steps)."
    )
    std_cal_level: Literal["group", "batch"] = Field(
        "group", description="Where the std is taken: over the task's episodes, or over every episode of the batch."
    )
    std_threshold: float | None = Field(
        None, ge=0, description="Drop the tasks whose episodes' reward std is at or below it; None keeps all."
    )


class GiGPOAdvantageArgs(_Args):
    omega: float = Field(1.0, ge=0, description="Weight of the step advantage: A_E + omega * A_S.")
    gamma: float = Field(1.0, ge=0, le=1, description="Discount of the step returns the step advantage compares.")
    fnorm: Literal["none", "std"] = Field(
        "none", description="Divide by the group's std ('std'), or by 1 ('none', the paper's for agents)."
    )
    epsilon: float = Field(1e-6, gt=0, description="Added to the divisor.")
    step_reward_key: Literal["step_reward"] = Field(
        "step_reward",
        description="Where a step's reward is found: trinity reads the experience's turn_rewards" + ONLY_DEFAULT,
    )
    env_state_hash_key: Literal["env_state_hash"] = Field(
        "env_state_hash",
        description="Where a step's anchor state is found: trinity compares the token contexts steps acted on"
        + ONLY_DEFAULT,
    )


class KLArgs(_Args):
    kl_coef: float = Field(0.001, ge=0, description="Weight of the KL term.")
    adaptive: Literal[False] = Field(False, description="Adapt kl_coef to a KL target" + ONLY_DEFAULT)


class EntropyLossArgs(_Args):
    entropy_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")


class PPOAdvantageArgs(_Args):
    gamma: float = Field(1.0, ge=0, le=1, description="Discount of future rewards (GAE's gamma).")
    lam: float = Field(1.0, ge=0, le=1, description="GAE's lambda: 1 is the Monte-Carlo return, 0 one-step TD.")


class ReinforcePlusPlusAdvantageArgs(_Args):
    gamma: float = Field(1.0, ge=0, le=1, description="Discount of the reward-to-go before whitening.")


class OPMDAdvantageArgs(_Args):
    opmd_baseline: Literal["mean", "logavgexp"] = Field(
        "mean", description="Group baseline: the mean reward, or tau * log(mean(exp(reward / tau)))."
    )
    tau: float = Field(1.0, gt=0, description="Temperature of the logavgexp baseline.")


class AsymREAdvantageArgs(_Args):
    baseline_shift: float = Field(-0.1, description="Added to the group's mean reward to make the baseline.")


class RECAdvantageArgs(_Args):
    epsilon: float = Field(1e-6, gt=0, description="Added to the group's reward std before dividing.")
    std_normalize: bool = Field(False, description="Divide by the group's reward std.")
    drop: Literal["balance"] | None = Field(
        None, description="'balance': drop random below-mean rollouts until they are no more than the others."
    )


class RAFTAdvantageArgs(_Args):
    min_reward: float | None = Field(
        None, description="A task's best rollout is trained on only if its reward reaches this (None: always)."
    )


class _MixLossArgs(_AggArgs):
    clip_range: float | None = Field(0.2, gt=0, description="PPO clip range of the RL part on both sides.")
    clip_range_low: float | None = Field(None, gt=0, description="Lower clip range; defaults to clip_range.")
    clip_range_high: float | None = Field(None, gt=0, description="Upper clip range; defaults to clip_range.")
    sft_loss_agg_mode: LossAggMode | None = Field(None, description="Aggregation of the SFT part (loss_agg_mode).")
    grpo_loss_agg_mode: LossAggMode | None = Field(None, description="Aggregation of the RL part (loss_agg_mode).")


class MixLossArgs(_MixLossArgs):
    mu: float = Field(0.1, ge=0, le=1, description="Weight of the SFT part: (1 - mu) RL + mu SFT.")


class MixChordLossArgs(_MixLossArgs):
    mu_warmup_steps: int = Field(0, ge=0, description="Steps over which mu rises linearly from 0 to mu_peak.")
    mu_decay_steps: int = Field(0, ge=0, description="Steps of the cosine decay from mu_peak to mu_valley after it.")
    mu_peak: float = Field(0.1, ge=0, le=1, description="mu at the end of the warm-up.")
    mu_valley: float = Field(0.1, ge=0, le=1, description="mu after the decay.")
    enable_phi_function: bool = Field(
        True, description="Weight each SFT token by p(1 - p) (CHORD-phi); False: plain SFT."
    )


class OnPolicyDistillAdvantageArgs(_Args):
    kl_coef: float = Field(1.0, ge=0, description="Scale of the advantage: kl_coef * (teacher - student log-prob).")


class JSDAdvantageArgs(_Args):
    lambda_coef: float = Field(
        0.5, ge=0, le=1, description="JSD's mixture weight of the teacher: 0 is KL(student||teacher), 1 the reverse."
    )
    kl_coef: float = Field(1.0, ge=0, description="Scale of the advantage: -kl_coef * JSD.")
    temperature: float = Field(1.0, gt=0, description="Both log-probs are divided by it before the JSD.")
    chunk_size: int | None = Field(None, gt=0, description="Tokens computed at once (memory only; same values).")


class DPOLossArgs(_Args):
    beta: float = Field(0.1, gt=0, description="Strength of the implicit KL to the reference model.")
    label_smoothing: float = Field(
        0.0, ge=0, le=0.5, description="Share of the loss that assumes the labels are swapped (conservative DPO)."
    )


class OPMDPolicyLossArgs(_AggArgs):
    tau: float = Field(1.0, ge=0, description="Regularisation strength: the loss is divided by 1 + tau.")


class TOPRPolicyLossArgs(_AggArgs):
    advantage_threshold: float = Field(
        0.0, description="At or below it a token's weight is its ratio clipped to [0, 1]; above it, 1."
    )


class SPPOPolicyLossArgs(_AggArgs):
    epsilon: float = Field(0.3, gt=0, description="Tokens whose ratio leaves [1/(1+epsilon), 1+epsilon] are masked.")


class SAPOPolicyLossArgs(_AggArgs):
    tau_pos: float = Field(1.0, gt=0, description="Soft-gate temperature for positive advantages.")
    tau_neg: float = Field(1.05, gt=0, description="Soft-gate temperature for negative advantages (>= tau_pos).")

    @model_validator(mode="after")
    def _negative_at_least_positive(self) -> "SAPOPolicyLossArgs":
        if self.tau_neg < self.tau_pos:
            raise ValueError(f"tau_neg ({self.tau_neg}) must be >= tau_pos ({self.tau_pos}), as SAPO requires")
        return self


class RECPolicyLossArgs(_AggArgs):
    epsilon_low: float = Field(0.2, gt=0, le=1, description="Lower edge of the trust region: 1 - epsilon_low.")
    epsilon_high: float = Field(0.2, gt=0, description="Upper edge of the trust region: 1 + epsilon_high.")
    epsilon_low_prime: float = Field(0.6, gt=0, le=1, description="ring: lower edge for positive advantages.")
    epsilon_high_prime: float = Field(2.0, gt=0, description="ring: upper edge for negative advantages.")
    clip_mode: Literal["none", "one-side", "gspo-one-side", "two-side", "ring"] = Field(
        "none", description="Which tokens are masked by their ratio."
    )
    weight: Literal["none", "importance_sampling", "gspo_importance_sampling", "advantage"] = Field(
        "none", description="Weight on each token's advantage."
    )
    regularizer: Literal["none", "k2", "forward-kl"] = Field("none", description="Regulariser added to the loss.")
    regularizer_coef: float = Field(0.0, ge=0, description="Weight of the regulariser.")
    temp: float = Field(1.0, gt=0, description="Temperature of weight 'advantage' (exp(advantage / temp)).")

    @model_validator(mode="after")
    def _sequence_ratio(self) -> "RECPolicyLossArgs":
        if self.weight == "gspo_importance_sampling" and self.clip_mode != "gspo-one-side":
            raise ValueError("weight 'gspo_importance_sampling' needs clip_mode 'gspo-one-side' (its sequence ratio)")
        return self
