"""The algorithm presets: what each `algorithm_type` fills in among the functions a user left unset, as
Trinity-RFT 0.6 does, and what its trainer reads."""

from dataclasses import dataclass
from typing import Literal


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
    # M2PO (Trinity-RFT's m2po): GRPO's advantages, the second-moment-masked loss, no KL and no entropy bonus
    "m2po": _rl("grpo", "m2po", kl_loss="none", entropy="none"),
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
