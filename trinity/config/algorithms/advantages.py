"""The advantage functions: one entry each, naming the estimator in verl's registry that computes it."""

from dataclasses import dataclass, field

from ..schema._base import Section
from .args import (
    AsymREAdvantageArgs,
    ClipBAdvantageArgs,
    GiGPOAdvantageArgs,
    GRPOAdvantageArgs,
    JSDAdvantageArgs,
    NoArgs,
    OnPolicyDistillAdvantageArgs,
    OPMDAdvantageArgs,
    PPOAdvantageArgs,
    RAFTAdvantageArgs,
    RECAdvantageArgs,
    ReinforcePlusPlusAdvantageArgs,
    StepWiseGRPOAdvantageArgs,
)
from .own import BY_KEY, OWN, named, registry_name

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
    module: str | None = None  # the trinity module of its own functions (an `estimator` it registers with verl, a
    # `token_mask`); None: verl's own
    critic: bool = False  # reads a critic model's values (the estimator's `values`): the trainer trains one
    teacher: bool = False  # reads a teacher model's log-probs (`teacher_log_probs`): the trainer keeps one
    selects: bool = False  # its values are 1/0 weights choosing the rollouts an SFT loss trains on (RAFT)
    greedy_baseline: bool = False  # reads the reward of each task's greedy rollout, which the explorer then makes
    # reads the actor's per-token entropy of each response (`entropy`), which the trainer then computes in its
    # old-policy forward pass
    entropy: bool = False
    # a function of `module` that takes tokens out of the loss after the advantages, over the whole batch (Clip_B's):
    # fn(advantages, log_probs, entropy, masks, **args) -> (1/0 per token, metrics), from the rollout's own log-probs;
    # the trainer multiplies it into the response mask, so the tokens it drops leave the loss and its token count
    token_mask: str | None = None


def _own(args: type[Section], module: str, names: tuple[str, ...] = (), **flags: bool) -> Advantage:
    """An estimator of trinity's, registered with verl by the algos module `module` under its key's registry name
    (own.py), taking upstream's argument names: `names` of them, else all."""
    kwargs = {name: name for name in names or args.model_fields}
    return Advantage(args, BY_KEY, kwargs=kwargs, module=OWN + module, **flags)


ADVANTAGES: dict[str, Advantage] = named(
    {
        # verl's grpo estimator, without its loop over rows (algos/grpo.py); the sampler reads std_threshold and
        # duplicate_experiences, and the other fields allow their defaults alone
        "grpo": _own(GRPOAdvantageArgs, "grpo", ("epsilon", "norm_adv_by_std"), grouped=True),
        # GAE over a critic's values, whitened over the batch (verl's gae, Trinity-RFT's ppo)
        "ppo": Advantage(PPOAdvantageArgs, "gae", kwargs={"gamma": "gamma", "lam": "lam"}, critic=True),
        "reinforceplusplus": Advantage(
            ReinforcePlusPlusAdvantageArgs, "reinforce_plus_plus", kwargs={"gamma": CONFIG + "gamma"}
        ),
        "rloo": Advantage(NoArgs, "rloo", grouped=True),
        # the return minus the reward of the task's greedy rollout (arXiv 2310.10505; verl's remax)
        "remax": Advantage(NoArgs, "remax", greedy_baseline=True),
        "reinforce": _own(NoArgs, "reinforce"),
        "opmd": _own(OPMDAdvantageArgs, "opmd", grouped=True),
        "asymre": _own(AsymREAdvantageArgs, "asymre", grouped=True),
        "rec": _own(RECAdvantageArgs, "rec", grouped=True),
        "raft": _own(RAFTAdvantageArgs, "raft", grouped=True, selects=True),
        # an episode's final reward normalised within its task, on every step (turn) of it
        "step_wise_grpo": _own(
            StepWiseGRPOAdvantageArgs,
            "multi_step",
            ("epsilon", "enable_step_norm", "std_cal_level"),  # the sampler reads the rest
            grouped=True,
        ),
        # the episode's normalised return plus omega x each step's return normalised among the steps of its context
        "gigpo": _own(
            GiGPOAdvantageArgs,
            "gigpo",
            ("omega", "gamma", "fnorm", "epsilon"),  # the keys name where they are read
            grouped=True,
        ),
        # GRPO's advantages (grpo's estimator), then Clip_B's entropy mask on the negative-advantage tokens (arXiv
        # 2602.03392; Trinity-RFT's clipb_advantage.py)
        "clipb": Advantage(
            ClipBAdvantageArgs,
            registry_name("grpo"),
            kwargs={"epsilon": "epsilon"},  # mu is the mask's
            grouped=True,
            module=OWN + "clipb",
            entropy=True,
            token_mask="clipb_mask",
        ),
        "on_policy_distill": _own(OnPolicyDistillAdvantageArgs, "distill", teacher=True),
        "jsd": _own(JSDAdvantageArgs, "distill", teacher=True),
        "none": Advantage(NoArgs),
    },
    "estimator",
)
# upstream's deprecated batch-wise versions compute the same values
ADVANTAGES |= {"grpo_verl": ADVANTAGES["grpo"], "opmd_verl": ADVANTAGES["opmd"], "asymre_verl": ADVANTAGES["asymre"]}
