"""Algorithm presets and the loss functions the runtime runs, with the arguments each accepts.

An `algorithm_type` names a preset that fills the functions a user left unset, as Trinity-RFT 0.6
does. Each function's arguments are a small model, so a negative clip range or a misspelled
argument is a config error here instead of something verl accepts silently. Upstream's other
algorithms and functions are known by name and refused with the reason (`UNSUPPORTED`); an
argument upstream has that the runtime cannot honour accepts only upstream's default.

Each advantage function and policy loss is an entry (`ADVANTAGES`, `POLICY_LOSSES`) naming the
function in verl's registries that computes it; the trainer looks it up there by that name
(trinity/runtime/trainer/functions.py). Adding an algorithm is its preset in `ALGORITHMS`, the
entries of functions it introduces, and, where verl lacks a function, one runtime module that
registers it with verl (named by the entry's `module`). `needs_rollout` is the one predicate of
whether an algorithm's trainer reads rollouts.
"""

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, model_validator

from .schema._base import Section
from .schema.algorithm import LossAggMode

ONLY_DEFAULT = "; only Trinity-RFT's default is supported yet"


class NoArgs(Section):
    """A function that takes no arguments."""


class _AggArgs(Section):
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


class CISPOPolicyLossArgs(_AggArgs):
    clip_range_low: float = Field(1.0, gt=0, description="Lower clip of the importance weight.")
    clip_range_high: float = Field(0.28, gt=0, description="Upper clip of the importance weight.")
    enable_mask_clip: Literal[False] = Field(
        False, description="Mask tokens whose ratio leaves the mask range" + ONLY_DEFAULT
    )
    mask_clip_range_low: float = Field(1.0, description="Lower mask range (unused while enable_mask_clip is off).")
    mask_clip_range_high: float = Field(0.28, description="Upper mask range (unused while enable_mask_clip is off).")


class StalenessArgs(Section):
    max_staleness: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="Experiences made by weights more than this many train steps older than the trainer's are "
        "dropped, never trained on (None: no limit, Trinity-RFT's inf).",
    )


class MixSampleArgs(Section):
    expert_data_ratio: float = Field(
        0.5, ge=0, lt=1, description="Share of each train batch taken from the SFT data set (rounded up)."
    )
    sft_dataset_name: str = Field(
        "sft_dataset", min_length=1, description="Name of the SFT data set in buffer.trainer_input.auxiliary_buffers."
    )


class GRPOAdvantageArgs(Section):
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


class StepWiseGRPOAdvantageArgs(Section):
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


class GiGPOAdvantageArgs(Section):
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


class KLArgs(Section):
    kl_coef: float = Field(0.001, ge=0, description="Weight of the KL term.")
    adaptive: Literal[False] = Field(False, description="Adapt kl_coef to a KL target" + ONLY_DEFAULT)


class EntropyLossArgs(Section):
    entropy_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")


class PPOAdvantageArgs(Section):
    gamma: float = Field(1.0, ge=0, le=1, description="Discount of future rewards (GAE's gamma).")
    lam: float = Field(1.0, ge=0, le=1, description="GAE's lambda: 1 is the Monte-Carlo return, 0 one-step TD.")


class ReinforcePlusPlusAdvantageArgs(Section):
    gamma: float = Field(1.0, ge=0, le=1, description="Discount of the reward-to-go before whitening.")


class OPMDAdvantageArgs(Section):
    opmd_baseline: Literal["mean", "logavgexp"] = Field(
        "mean", description="Group baseline: the mean reward, or tau * log(mean(exp(reward / tau)))."
    )
    tau: float = Field(1.0, gt=0, description="Temperature of the logavgexp baseline.")


class AsymREAdvantageArgs(Section):
    baseline_shift: float = Field(-0.1, description="Added to the group's mean reward to make the baseline.")


class RECAdvantageArgs(Section):
    epsilon: float = Field(1e-6, gt=0, description="Added to the group's reward std before dividing.")
    std_normalize: bool = Field(False, description="Divide by the group's reward std.")
    drop: Literal["balance"] | None = Field(
        None, description="'balance': drop random below-mean rollouts until they are no more than the others."
    )


class RAFTAdvantageArgs(Section):
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


class OnPolicyDistillAdvantageArgs(Section):
    kl_coef: float = Field(1.0, ge=0, description="Scale of the advantage: kl_coef * (teacher - student log-prob).")


class JSDAdvantageArgs(Section):
    lambda_coef: float = Field(
        0.5, ge=0, le=1, description="JSD's mixture weight of the teacher: 0 is KL(student||teacher), 1 the reverse."
    )
    kl_coef: float = Field(1.0, ge=0, description="Scale of the advantage: -kl_coef * JSD.")
    temperature: float = Field(1.0, gt=0, description="Both log-probs are divided by it before the JSD.")
    chunk_size: int | None = Field(None, gt=0, description="Tokens computed at once (memory only; same values).")


class DPOLossArgs(Section):
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


KL_KINDS = ("k1", "k2", "k3", "low_var_kl", "abs", "mse")

CONFIG = "config."  # an estimator keyword under this prefix is a field of the `config` (verl's AlgoConfig) it is given


@dataclass(frozen=True)
class Advantage:
    """An advantage function: its arguments, and the estimator in verl's registry that computes it.

    `estimator` is a name in verl's advantage-estimator registry (`get_adv_estimator_fn`); a function
    trinity defines itself is registered there beside verl's own by `module` (a runtime module the
    trainer imports first). The trainer calls the estimator with the inputs its signature names
    (token_level_rewards, response_mask, index, config) plus our arguments renamed by `kwargs`.
    """

    args: type[Section]
    estimator: str | None = None  # None: this function computes no advantages (a loss that reads none)
    kwargs: dict[str, str] = field(default_factory=dict)  # our argument -> the estimator's keyword (or config.<field>)
    # compares the rollouts (episodes) of one task with each other (the estimator reads `index` or `episodes`)
    grouped: bool = False
    module: str | None = None  # the trinity module that registers `estimator` with verl; None: verl's own
    critic: bool = False  # reads a critic model's values (the estimator's `values`): the trainer trains one
    teacher: bool = False  # reads a teacher model's log-probs (`teacher_log_probs`): the trainer keeps one
    selects: bool = False  # its values are 1/0 weights choosing the rollouts an SFT loss trains on (RAFT)
    greedy_baseline: bool = False  # reads the reward of each task's greedy rollout, which the explorer then makes


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


OWN = "trinity.runtime.trainer.algos."  # the package of trinity's own functions, one module per algorithm family


def _same_names(args: type[Section]) -> dict[str, str]:
    """Every argument passed under its own name (trinity's own estimators take upstream's names)."""
    return {name: name for name in args.model_fields}


def _own(args: type[Section], name: str, module: str, **flags: bool) -> Advantage:
    """An estimator of trinity's: registered with verl as `trinity_<name>` by the algos module `module`, taking
    upstream's argument names."""
    return Advantage(args, f"trinity_{name}", kwargs=_same_names(args), module=OWN + module, **flags)


ADVANTAGES: dict[str, Advantage] = {
    "grpo": Advantage(
        GRPOAdvantageArgs,
        "grpo",
        kwargs={"epsilon": "epsilon", "norm_adv_by_std": "norm_adv_by_std_in_grpo"},
        grouped=True,
    ),
    # GAE over a critic's values, whitened over the batch (verl's gae, Trinity-RFT's ppo)
    "ppo": Advantage(PPOAdvantageArgs, "gae", kwargs={"gamma": "gamma", "lam": "lam"}, critic=True),
    "reinforceplusplus": Advantage(
        ReinforcePlusPlusAdvantageArgs, "reinforce_plus_plus", kwargs={"gamma": CONFIG + "gamma"}
    ),
    "rloo": Advantage(NoArgs, "rloo", grouped=True),
    # the return minus the reward of the task's greedy rollout (arXiv 2310.10505; verl's remax)
    "remax": Advantage(NoArgs, "remax", greedy_baseline=True),
    "reinforce": _own(NoArgs, "reinforce", "reinforce"),
    "opmd": _own(OPMDAdvantageArgs, "opmd", "opmd", grouped=True),
    "asymre": _own(AsymREAdvantageArgs, "asymre", "asymre", grouped=True),
    "rec": _own(RECAdvantageArgs, "rec", "rec", grouped=True),
    "raft": _own(RAFTAdvantageArgs, "raft", "raft", grouped=True, selects=True),
    # an episode's final reward normalised within its task, on every step (turn) of it
    "step_wise_grpo": Advantage(
        StepWiseGRPOAdvantageArgs,
        "trinity_step_wise_grpo",
        kwargs={name: name for name in ("epsilon", "enable_step_norm", "std_cal_level")},  # the sampler reads the rest
        grouped=True,
        module=OWN + "multi_step",
    ),
    # the episode's normalised return plus omega x each step's return normalised among the steps of its context
    "gigpo": Advantage(
        GiGPOAdvantageArgs,
        "trinity_gigpo",
        kwargs={name: name for name in ("omega", "gamma", "fnorm", "epsilon")},  # the keys name where they are read
        grouped=True,
        module=OWN + "gigpo",
    ),
    "on_policy_distill": _own(OnPolicyDistillAdvantageArgs, "on_policy_distill", "distill", teacher=True),
    "jsd": _own(JSDAdvantageArgs, "jsd", "distill", teacher=True),
    "none": Advantage(NoArgs),
}
# upstream's deprecated batch-wise versions compute the same values
ADVANTAGES |= {"grpo_verl": ADVANTAGES["grpo"], "opmd_verl": ADVANTAGES["opmd"], "asymre_verl": ADVANTAGES["asymre"]}

POLICY_LOSSES: dict[str, PolicyLoss] = {
    "ppo": PolicyLoss(PPOPolicyLossArgs, "vanilla"),
    "sft": PolicyLoss(SFTLossArgs, batch="sft"),
    "gspo": PolicyLoss(GSPOPolicyLossArgs, "gspo"),
    "cispo": PolicyLoss(CISPOPolicyLossArgs, "cispo"),
    "opmd": PolicyLoss(OPMDPolicyLossArgs, "trinity_opmd", module=OWN + "opmd"),
    "topr": PolicyLoss(TOPRPolicyLossArgs, "trinity_topr", module=OWN + "topr"),
    "rec": PolicyLoss(RECPolicyLossArgs, "trinity_rec", module=OWN + "rec"),
    "sppo": PolicyLoss(SPPOPolicyLossArgs, "trinity_sppo", module=OWN + "sppo"),
    "sapo": PolicyLoss(SAPOPolicyLossArgs, "trinity_sapo", module=OWN + "sapo"),
    "dpo": PolicyLoss(DPOLossArgs, "trinity_dpo", batch="pairs", module=OWN + "dpo"),
    "importance_sampling": PolicyLoss(
        ImportanceSamplingLossArgs, "trinity_importance_sampling", module=OWN + "distill"
    ),
    # SFT data mixed into RL batches: verl's PPO loss on the rollouts, an SFT loss on the samples
    "mix": PolicyLoss(MixLossArgs, "vanilla", batch="mix", module=OWN + "mix", actor_loss="mix_loss"),
    "mix_chord": PolicyLoss(MixChordLossArgs, "vanilla", batch="mix", module=OWN + "mix", actor_loss="chord_loss"),
    # SFT with each token's loss weighted by its probability p (sft_is) or by p(1 - p) (sft_phi, CHORD's)
    "sft_is": PolicyLoss(SFTLossArgs, batch="sft", module=OWN + "mix", actor_loss="sft_is_loss"),
    "sft_phi": PolicyLoss(SFTPhiLossArgs, batch="sft", module=OWN + "mix", actor_loss="sft_phi_loss"),
}


@dataclass(frozen=True)
class SampleStrategy:
    """How the trainer takes each batch from the buffer."""

    args: type[Section]
    drops_stale: bool = False  # drops experiences older than max_staleness train steps (StalenessArgs)
    mixes: bool = False  # fills part of each batch from an SFT data set (MixSampleArgs)
    same_as: str | None = None  # a deprecated name of another strategy, which it is


SAMPLE_STRATEGIES: dict[str, SampleStrategy] = {
    "default": SampleStrategy(NoArgs),  # experiences in the order they arrive
    "warmup": SampleStrategy(NoArgs, same_as="default"),  # deprecated upstream, kept for its old configs
    "staleness_control": SampleStrategy(StalenessArgs, drops_stale=True),
    "mix": SampleStrategy(MixSampleArgs, mixes=True),
}

# function kind -> name -> the arguments it takes (what the runtime can run)
FUNCTIONS: dict[str, dict[str, type[Section]]] = {
    "sample_strategy": {name: strategy.args for name, strategy in SAMPLE_STRATEGIES.items()},
    "policy_loss_fn": {name: loss.args for name, loss in POLICY_LOSSES.items()},
    "advantage_fn": {name: advantage.args for name, advantage in ADVANTAGES.items()},
    # a penalty has no old policy to correct by, so upstream's corrected_k3 penalty is k3
    "kl_penalty_fn": {"none": KLArgs, **{kind: KLArgs for kind in (*KL_KINDS, "corrected_k3")}},
    "kl_loss_fn": {"none": KLArgs, **{kind: KLArgs for kind in KL_KINDS}},
    # mix: the entropy bonus of the rollouts only (the mixing losses'; elsewhere the same as default)
    "entropy_loss_fn": {"default": EntropyLossArgs, "none": EntropyLossArgs, "mix": EntropyLossArgs},
}

# Upstream's names the runtime cannot run yet, with the reason.
UNSUPPORTED: dict[str, dict[str, str]] = {
    "advantage_fn": {
        name: "this advantage masks tokens by the trainer's per-token entropy, which the trainer does not hand to "
        "advantage functions yet"
        for name in ("clipb", "clipv")
    },
    "kl_loss_fn": {"corrected_k3": "verl has no corrected k3 KL loss"},
}


@dataclass(frozen=True)
class Preset:
    """What an algorithm_type fills in."""

    functions: dict[str, str]
    # what the trainer reads: rollouts from the explorer, or a data set of (prompt, response) samples, of
    # (prompt, chosen, rejected) pairs, or of raw text (continued pre-training), with no explorer
    data: Literal["rollouts", "sft", "pairs", "text"] = "rollouts"
    loss_agg_mode: str = "token-mean"


def _rl(
    advantage: str, policy: str, kl_loss: str = "k2", entropy: str = "default", sample: str = "default", **kwargs
) -> Preset:
    """An RL preset as upstream writes them: default sampling, no KL penalty in the reward."""
    functions = {
        "sample_strategy": sample,
        "advantage_fn": advantage,
        "policy_loss_fn": policy,
        "kl_penalty_fn": "none",
        "kl_loss_fn": kl_loss,
        "entropy_loss_fn": entropy,
    }
    return Preset(functions, **kwargs)


_SFT = {
    "sample_strategy": "default",
    "advantage_fn": "none",
    "policy_loss_fn": "sft",
    "kl_penalty_fn": "none",
    "kl_loss_fn": "none",
    "entropy_loss_fn": "none",
}

ALGORITHMS: dict[str, Preset] = {
    "grpo": _rl("grpo", "ppo"),
    # upstream computes the same advantages in its trainer; trinity's trainer always does
    "grpo_verl": _rl("grpo", "ppo"),
    "dapo": _rl("grpo", "ppo", kl_loss="none"),  # DAPO's clip-higher and token-mean loss are arguments you set
    "gspo": _rl("grpo", "gspo"),
    "cispo": _rl("grpo", "cispo"),
    "sft": Preset(_SFT, data="sft"),
    "ppo": _rl("ppo", "ppo"),
    "reinforceplusplus": _rl("reinforceplusplus", "ppo"),
    "rloo": _rl("rloo", "ppo"),
    "opmd": _rl("opmd", "opmd"),
    "asymre": _rl("asymre", "opmd", kl_loss="none", entropy="none"),
    "topr": _rl("reinforce", "topr"),
    "sapo": _rl("grpo", "sapo"),
    "rec": _rl("rec", "rec"),
    "sppo": _rl("opmd", "sppo", kl_loss="none", entropy="none"),
    "multi_step_grpo": _rl("step_wise_grpo", "ppo"),
    "gigpo": _rl("gigpo", "ppo"),
    "on_policy_distill": _rl("on_policy_distill", "ppo", kl_loss="none", entropy="none"),
    "jsd": _rl("jsd", "ppo", kl_loss="none", entropy="none"),
    "mix": _rl("grpo", "mix", entropy="mix", sample="mix"),
    "mix_chord": _rl("grpo", "mix_chord", entropy="mix", sample="mix"),
    # the SFT loss on each task's best rollout (upstream's preset trains on every rollout: advantage_fn none)
    "raft": Preset({**_SFT, "advantage_fn": "raft"}),
    "dpo": Preset({**_SFT, "policy_loss_fn": "dpo", "kl_loss_fn": "k2", "entropy_loss_fn": "default"}, data="pairs"),
    "cpt": Preset(_SFT, data="text"),
}


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
