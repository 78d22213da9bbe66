"""DPO (direct preference optimisation, arXiv 2305.18290; Trinity-RFT's `dpo`): rows alternate a chosen and a
rejected response to one prompt; the loss pushes the chosen one's log-ratio to the reference model above the
rejected one's. The trainer's pairs batch hands the reference's log-probs where an RL batch has the old policy's."""

import torch
import torch.nn.functional as F

from ..functions import own_loss


@own_loss("dpo")
def dpo_loss(log_prob, old_log_prob, advantages, response_mask, agg, *, beta=0.1, label_smoothing=0.0, **_):
    """Mean over pairs of -(1 - ls) logsigmoid(beta z) - ls logsigmoid(-beta z), z = (log pi - log ref) summed over
    the chosen response minus the same over the rejected one; `old_log_prob` is the reference's."""
    ratios = ((log_prob - old_log_prob) * response_mask.float()).sum(-1)  # per response
    chosen, rejected = ratios[0::2], ratios[1::2]
    z = beta * (chosen - rejected)
    losses = -F.logsigmoid(z) * (1 - label_smoothing) - F.logsigmoid(-z) * label_smoothing
    # each pair's loss on the first token of its chosen row: verl's per-sequence mean over the whole batch (every
    # rank and micro-batch) counts two rows a pair, hence the 2
    per_token = torch.zeros_like(log_prob)
    per_token[0::2, 0] = losses
    loss = 2 * agg(per_token, "seq-mean-token-sum")
    return loss, {
        "actor/dpo_chosen_reward": float(beta * chosen.detach().mean()),
        "actor/dpo_rejected_reward": float(beta * rejected.detach().mean()),
        "actor/dpo_accuracy": float((chosen > rejected).float().mean()),
    }
