"""Clip_B (arXiv 2602.03392; Trinity-RFT's `clipb`, trinity/algorithm/advantage_fn/clipb_advantage.py of its 0.6.0
wheel): GRPO's advantages (grpo.py, as verl's grpo estimator: a task's rewards less their mean over their unbiased
std plus epsilon, a task of one rollout mean 0 and std 1, on every response token), then an entropy mask on the
tokens of negative advantage.

Per valid token, with p = exp(log-prob) of the token under the rollout (upstream's `rollout_log_probs`: the engine's
log-probs, whatever algorithm.bypass_old_logprobs says) and H the actor's entropy of its distribution there (upstream's
`entropys`: the trainer's forward pass before the update, at the sampling temperature), the signal is
S = p (H + log p). Its mean and population variance are taken over every valid token of the batch (every trainer
rank's), and a token of negative advantage whose S - mean falls below -mu x std leaves the loss; tokens of positive or
zero advantage always stay, and with a std under 1e-12 every token does. Upstream multiplies the keep mask into the
batch's response mask, so a dropped token adds nothing to the loss, its token count (the token-mean's denominator),
the KL and entropy terms: the trainer does the same with this module's mask (step.py `_token_mask`).
"""

import torch

from . import grpo  # noqa: F401  (registers GRPO's estimator: Clip_B's advantages are its)

KEEP_ALL_BELOW_STD = 1e-12  # upstream's: a signal this flat masks nothing


def _clipped(keep: torch.Tensor, among: torch.Tensor) -> float:
    """The share of the tokens `among` marks that `keep` drops: 0 where there are none (upstream's reads 1 - 0/1 = 1
    then, a batch without a positive token reporting all its positive tokens clipped)."""
    total = among.sum()
    return 1.0 - float((keep * among).sum() / total) if total > 0 else 0.0


def _padded(rows: list[list[float]], width: int) -> torch.Tensor:
    return torch.tensor([list(row) + [0.0] * (width - len(row)) for row in rows], dtype=torch.float32)


def clipb_mask(
    advantages: list[list[float]],
    log_probs: list[list[float]],
    entropy: list[list[float]],
    masks: list[list[int]],
    mu: float = 2.5,
    **_: object,
) -> tuple[list[list[int]], dict[str, float]]:
    """Per response token 1 (kept) or 0 (taken out of the loss) over the whole batch, and upstream's metrics:
    frac_clipped (of every valid token), frac_clipped_pos and frac_clipped_neg (of the valid tokens of positive and of
    negative advantage; 0 where there are none), ES and varS (the signal's mean and population variance over the valid
    tokens). Rows are the responses of the batch; a token is valid where its mask is 1. Computed in float32, as
    upstream."""
    width = max((len(row) for row in masks), default=0)
    valid = _padded(masks, width)
    advantage = _padded(advantages, width) * valid  # upstream's advantages are 0 off the response mask
    log_p = _padded(log_probs, width)
    signal = torch.where(valid.bool(), log_p.exp() * (_padded(entropy, width) + log_p), 0.0)
    count = valid.sum().clamp_min(1.0)
    mean = (signal * valid).sum() / count
    variance = ((signal - mean) ** 2 * valid).sum() / count
    std = variance.sqrt()
    keep = torch.ones_like(valid)
    if std.item() >= KEEP_ALL_BELOW_STD:
        keep = torch.where(advantage < 0, (signal - mean >= -(mu * std)).float(), keep)
    negative, positive = (advantage < 0).float() * valid, (advantage > 0).float() * valid
    metrics = {
        "frac_clipped": _clipped(keep, valid),
        "frac_clipped_pos": _clipped(keep, positive),
        "frac_clipped_neg": _clipped(keep, negative),
        "ES": float(mean),
        "varS": float(variance),
    }
    return [[int(k) for k in row[: len(mask)]] for row, mask in zip(keep.tolist(), masks)], metrics
