"""Our side of the RL and SFT wiring: experiences to the tensors verl's actor consumes.

RL batches are left-right padded (prompts padded on the left, responses on the right), with the
rollout engine's log-probs as the old policy's (the trainer recomputes them when
`algorithm.bypass_old_logprobs` is false), the reward on a response's last token (each turn's on its own last
token, where turns are rewarded on their own), and per-token
advantages from the estimator the algorithm names (`functions.advantages`). SFT batches are packed
sequences with a loss mask over the response tokens.

A multi-turn experience's response holds the environment's turns too: they are attended to like the rest, but its
action mask keeps them out of the response mask, so no loss, advantage or token count reads them, and the reward
sits on the model's last token (of the turn it rewards).
"""

import numpy as np
import torch

from ..experience import Experience


def padded(exps: list[Experience], pad_id: int) -> dict[str, torch.Tensor]:
    """prompts (left-padded), responses (right-padded), input_ids, attention_mask, position_ids, response_mask."""
    width_p = max(len(e.prompt_ids) for e in exps)
    width_r = max(len(e.response_ids) for e in exps)
    # each row whole, then the prompts' and responses' columns copied out: two conversions of lists, not five
    ids, attention = [], []
    for e in exps:
        before, after = width_p - len(e.prompt_ids), width_r - len(e.response_ids)
        ids.append([pad_id] * before + e.prompt_ids + e.response_ids + [pad_id] * after)
        attention.append([0] * before + [1] * (len(e.prompt_ids) + len(e.response_ids)) + [0] * after)
    input_ids, attention_mask = torch.tensor(ids), torch.tensor(attention)
    return {
        "prompts": input_ids[:, :width_p].clone(),
        "responses": input_ids[:, width_p:].clone(),
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": torch.clamp(attention_mask.cumsum(dim=1) - 1, min=0),
        "response_mask": response_mask(exps),
    }


def response_mask(exps: list[Experience]) -> torch.Tensor:
    """The model's own response tokens (1; the environment's and the padding 0), right-padded to the longest."""
    width = max(len(e.response_ids) for e in exps)
    return torch.tensor([e.mask() + [0] * (width - len(e.response_ids)) for e in exps])


def token_rewards(
    exps: list[Experience], response_mask: torch.Tensor, penalties: list[list[float]] | None = None
) -> torch.Tensor:
    """Each turn's reward on the turn's last token (a single turn's: the experience's reward on its last trained
    token), zeros elsewhere, less each token's KL penalty."""
    rows, columns, values = [], [], []  # where each reward goes: one write of them all
    for row, exp in enumerate(exps):
        turns = exp.turns()
        # no token of the model's (an empty response): the reward still counts in its group
        placed = zip(turns, exp.rewards_by_turn(turns)) if turns else [((0, 1), exp.reward)]
        for (_, end), reward in placed:
            rows.append(row)
            columns.append(end - 1)
            values.append(reward)
    rewards = torch.zeros(response_mask.shape, dtype=torch.float32)
    rewards[rows, columns] = torch.tensor(values, dtype=torch.float32)
    if penalties is not None:
        rewards -= per_token(penalties, response_mask.shape[1])
    return rewards


def old_logprobs(exps: list[Experience], width: int) -> torch.Tensor:
    """The rollout engine's log-probs, right-padded with zeros."""
    return torch.tensor([e.logprobs + [0.0] * (width - len(e.logprobs)) for e in exps], dtype=torch.float32)


def per_token(rows: list[list[float]], width: int) -> torch.Tensor:
    """Per-response-token values (advantages, penalties), right-padded with zeros to `width`."""
    return torch.tensor([list(r) + [0.0] * (width - len(r)) for r in rows], dtype=torch.float32)


def kl(log_prob: torch.Tensor, ref_log_prob: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token KL estimate of `kind`, as Trinity-RFT's penalties compute it: k3 unclamped (verl's k3 is its clamped
    low_var_kl), corrected_k3 without an old policy to correct by is k3; the others verl's estimators."""
    if kind in ("k3", "corrected_k3"):
        log_ratio = ref_log_prob - log_prob
        return log_ratio.exp() - 1 - log_ratio
    from verl.trainer.ppo.core_algos import kl_penalty

    return kl_penalty(log_prob, ref_log_prob, kind)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean of `values` over the positions where `mask` is 1 (what lies outside, even inf or nan, is never read)."""
    kept = values[mask.bool()]
    return float(kept.mean()) if kept.numel() else 0.0


def sft_batch(exps: list[Experience], weights: list[list[float]] | None = None) -> dict[str, torch.Tensor]:
    """Packed (nested) sequences with a loss mask over each response, as verl's sft_loss reads them; `weights` (one
    per response token, RAFT's 1 or 0) multiply the mask."""
    sequences = [e.prompt_ids + e.response_ids for e in exps]
    offsets = torch.tensor([0, *np.cumsum([len(s) for s in sequences])])
    weights = weights or [[1] * len(e.response_ids) for e in exps]
    mask = [[0] * len(e.prompt_ids) + [int(w) * a for w, a in zip(row, e.mask())] for e, row in zip(exps, weights)]
    return {
        "input_ids": torch.nested.nested_tensor_from_jagged(
            torch.tensor([t for s in sequences for t in s]), offsets=offsets
        ),
        "position_ids": torch.nested.nested_tensor_from_jagged(
            torch.cat([torch.arange(len(s)) for s in sequences]), offsets=offsets
        ),
        "loss_mask": torch.nested.nested_tensor_from_jagged(
            torch.tensor([m for row in mask for m in row]), offsets=offsets
        ),
    }


def expert_mask(exps: list[Experience], response_mask: torch.Tensor) -> torch.Tensor:
    """The response mask of the rows that are SFT samples mixed into the batch (sample strategy mix); 0 elsewhere."""
    return response_mask * torch.tensor([[int(e.expert)] for e in exps])


def counts(exps: list[Experience]) -> dict[str, int]:
    """The whole batch's response tokens and rows, of its rollouts and of its mixed-in SFT samples: what a loss
    that treats the two apart aggregates each part over."""
    out = {"rollout_tokens": 0, "rollout_rows": 0, "sample_tokens": 0, "sample_rows": 0}
    for e in exps:
        part = "sample" if e.expert else "rollout"
        out[f"{part}_tokens"] += sum(e.mask())
        out[f"{part}_rows"] += 1
    return out


def scatter_rows(rows: list[list[float]] | None, kept: list[int], exps: list[Experience]) -> list[list[float]] | None:
    """Per-token rows computed for `exps[i]` for i in `kept`, in place among zeros for the other experiences (None:
    the function computes none)."""
    if rows is None:
        return None
    out = [[0.0] * len(e.response_ids) for e in exps]
    for i, row in zip(kept, rows):
        out[i] = row
    return out


def shards(items: list, world_size: int) -> list[list]:
    """Split a batch over the trainer ranks in contiguous, equal parts."""
    size = len(items) // world_size
    return [items[r * size : (r + 1) * size] for r in range(world_size)]


def tokens(exp: Experience) -> int:
    """The tokens a row puts through the model: its prompt's and its response's (an attention mask's ones)."""
    return len(exp.prompt_ids) + len(exp.response_ids)


def balanced(items: list[Experience], world_size: int) -> tuple[list[Experience], dict[str, float]]:
    """`items` reordered so that `shards` deals each rank about the same work (trainer.balance_batch), and the
    global_seqlen/* metrics of the deal. The rows `shards` deals (the batch less its last len % world_size, which
    stay last, as without balancing) are partitioned into world_size parts of as many rows by verl's sequence-length
    balancer on its workload estimate (a row's tokens and their square: the attention's quadratic share); within a
    part, rows go lightest, third lightest, ... then ..., fourth lightest, second lightest, so that consecutive
    micro-batches of a rank carry alike work. The metrics are the tokens (prompt + response) per rank of the
    contiguous deal (min, max, minmax_diff), of the balanced one (balanced_min, balanced_max), and their mean."""
    size = len(items) // world_size
    if size == 0:  # no rank gets a row: nothing to deal
        return items, {}
    from verl.utils.seqlen_balancing import calculate_workload, get_seqlen_balanced_partitions

    dealt = items[: size * world_size]
    lengths = [tokens(e) for e in dealt]
    work = calculate_workload(torch.tensor(lengths, dtype=torch.int64)).tolist()
    # one rank's part is every row (the balancer's Karmarkar-Karp would find just that, at a cost)
    parts = [range(len(dealt))] if world_size == 1 else get_seqlen_balanced_partitions(work, world_size, True)
    order = []
    for part in parts:
        ranked = sorted(part, key=lambda i: (work[i], i))
        order += ranked[0::2] + ranked[1::2][::-1]
    before = [sum(lengths[r * size : (r + 1) * size]) for r in range(world_size)]
    after = [sum(lengths[i] for i in part) for part in parts]
    metrics = {
        "global_seqlen/min": min(before),
        "global_seqlen/max": max(before),
        "global_seqlen/minmax_diff": max(before) - min(before),
        "global_seqlen/balanced_min": min(after),
        "global_seqlen/balanced_max": max(after),
        "global_seqlen/mean": sum(lengths) / world_size,
    }
    return [dealt[i] for i in order] + items[size * world_size :], metrics


def metric_mean(values: object) -> float | None:
    """The mean of a verl metric (one value, or one per micro-batch); None where it has none."""
    values = values if isinstance(values, list) else [values]
    values = [float(v) for v in values if v is not None]
    return sum(values) / len(values) if values else None
