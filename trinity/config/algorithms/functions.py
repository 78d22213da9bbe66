"""Every function kind an algorithm section names, with the names the runtime can run and the arguments each takes,
and upstream's names it cannot run yet, with the reason."""

from ..schema._base import Section
from .advantages import ADVANTAGES
from .args import EntropyLossArgs, KLArgs
from .losses import POLICY_LOSSES
from .sampling import SAMPLE_STRATEGIES

KL_KINDS = ("k1", "k2", "k3", "low_var_kl", "abs", "mse")

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
        # clipv_advantage.py reads exps.batch["necs"], which no module of Trinity-RFT 0.6.0 writes
        "clipv": "beside the per-token entropy it reads a per-token column 'necs' that no trainer computes, "
        "Trinity-RFT's included"
    },
    "kl_loss_fn": {"corrected_k3": "verl has no corrected k3 KL loss"},
}
