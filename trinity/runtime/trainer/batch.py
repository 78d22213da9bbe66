"""Our side of the RL and SFT wiring: experiences to the tensors verl's actor consumes.

RL batches are left-right padded (prompts padded on the left, responses on the right), with the
rollout engine's log-probs as the old policy's (the trainer recomputes them when
`algorithm.bypass_old_logprobs` is false), the reward on a response's last token, and per-token
advantages from the estimator the algorithm names (`functions.advantages`). SFT batches are packed
sequences with a loss mask over the response tokens.
"""

import numpy as np
import torch

from ..experience import Experience


def padded(exps: list[Experience], pad_id: int) -> dict[str, torch.Tensor]:
    """prompts (left-padded), responses (right-padded), input_ids, attention_mask, position_ids, response_mask."""
    width_p = max(len(e.prompt_ids) for e in exps)
    width_r = max(len(e.response_ids) for e in exps)
    prompts = torch.tensor([[pad_id] * (width_p - len(e.prompt_ids)) + e.prompt_ids for e in exps])
    responses = torch.tensor([e.response_ids + [pad_id] * (width_r - len(e.response_ids)) for e in exps])
    prompt_mask = torch.tensor([[0] * (width_p - len(e.prompt_ids)) + [1] * len(e.prompt_ids) for e in exps])
    response_mask = torch.tensor([[1] * len(e.response_ids) + [0] * (width_r - len(e.response_ids)) for e in exps])
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    return {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": torch.clamp(attention_mask.cumsum(dim=1) - 1, min=0),
        "response_mask": response_mask,
    }


def token_rewards(exps: list[Experience], response_mask: torch.Tensor) -> torch.Tensor:
    """Each experience's reward on its last response token, zeros elsewhere."""
    rewards = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = response_mask.sum(dim=1) - 1
    rewards[torch.arange(len(exps)), last] = torch.tensor([e.reward for e in exps], dtype=torch.float32)
    return rewards


def old_logprobs(exps: list[Experience], width: int) -> torch.Tensor:
    """The rollout engine's log-probs, right-padded with zeros."""
    return torch.tensor([e.logprobs + [0.0] * (width - len(e.logprobs)) for e in exps], dtype=torch.float32)


def rl_tensors(exps: list[Experience], advantages: list[list[float]], pad_id: int) -> dict[str, torch.Tensor]:
    """Padded sequences, the engine's log-probs as the old policy's, and each experience's per-token advantages
    (one per response token, zeros on the padding)."""
    tensors = padded(exps, pad_id)
    width = tensors["responses"].shape[1]
    tensors["old_log_probs"] = old_logprobs(exps, width)
    tensors["advantages"] = torch.tensor([list(a) + [0.0] * (width - len(a)) for a in advantages], dtype=torch.float32)
    return tensors


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean of `values` over the positions where `mask` is 1 (what lies outside, even inf or nan, is never read)."""
    kept = values[mask.bool()]
    return float(kept.mean()) if kept.numel() else 0.0


def sft_batch(exps: list[Experience]) -> dict[str, torch.Tensor]:
    """Packed (nested) sequences with a loss mask over each response, as verl's sft_loss reads them."""
    sequences = [e.prompt_ids + e.response_ids for e in exps]
    offsets = torch.tensor([0, *np.cumsum([len(s) for s in sequences])])
    mask = [[0] * len(e.prompt_ids) + [1] * len(e.response_ids) for e in exps]
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


def shards(items: list, world_size: int) -> list[list]:
    """Split a batch over the trainer ranks in contiguous, equal parts."""
    size = len(items) // world_size
    return [items[r * size : (r + 1) * size] for r in range(world_size)]
