"""The responses' values of verl's no-padding layout, padded: verl's `no_padding_2_padding`, without its loop over rows.

A value at a packed position is the next token's (a log-prob, an entropy, a critic's value), so a response's k-th
value is at its sequence's column (length - response - 1) + k. verl 0.9.1 slices each row's responses out of the
packed values and pads the slice, one row at a time, with scalar tensors for bounds: on the demo's 128 rows, one
thread, 3.7 ms forward and 6.6 ms forward and backward per call (its backward is a slice's and a pad's per row too),
and verl's ppo_loss calls it twice an update (the log-probs and the entropy). Here each response token's packed
position is found at once (`response_positions`) and the values are gathered into the padded rows in one write: the
same values, zeros past each response, the same gradient. `install` makes it what verl's losses call (ppo_loss,
value_loss); trinity's own readers call it directly.
"""

import torch
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.workers.utils import losses


def install() -> None:
    """verl's losses read the responses' values with `padded_responses` (idempotent)."""
    losses.no_padding_2_padding = padded_responses


def padded_responses(tensor: torch.Tensor, data: TensorDict) -> torch.Tensor:
    """The responses' values of `tensor` (nested, or packed: total tokens x ...) as rows x the responses' width x
    ..., zeros past each response, as verl's `no_padding_2_padding` returns them (`data`: prompts, responses and,
    where those are padded, the attention mask)."""
    values = tensor.values() if tensor.is_nested else tensor
    responses, lengths = _lengths(data)
    # the one read of the device's values: the tokens, the empty prompts, the longest response, the response tokens
    total, empty, longest, kept = torch.stack(
        [lengths.sum(), lengths.eq(responses).sum(), responses.max(), responses.sum()]
    ).tolist()
    if total != values.shape[0]:
        raise ValueError(f"the batch has {total} tokens but the packed values {values.shape[0]}")
    if empty:  # a response's first value is its prompt's last token's
        raise ValueError(f"{empty} rows of the batch have an empty prompt")
    if not data["prompts"].is_nested:
        width = data["responses"].shape[1]
    else:
        width = tu.get_non_tensor_data(data=data, key="max_response_len", default=-1)
        width = width if width >= 0 else longest
    packed, rows, nth = _places(responses, lengths, kept)
    out = values.new_zeros((len(lengths), width, *values.shape[1:]))
    return out.index_put((rows, nth), values[packed])


def response_positions(data: TensorDict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Where the responses' values are, as `padded_responses` reads them: each one's position in the packed
    sequence, its row and its column within the row's sequence; on the batch's device."""
    responses, lengths = _lengths(data)
    packed, rows, nth = _places(responses, lengths)
    return packed, rows, (lengths - responses - 1)[rows] + nth


def _lengths(data: TensorDict) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's response length and whole length."""
    if data["prompts"].is_nested:
        responses = data["responses"].offsets().diff()
        return responses, data["prompts"].offsets().diff() + responses
    width = data["prompts"].shape[1]
    return data["attention_mask"][:, width:].sum(dim=1), data["attention_mask"].sum(dim=1)


def _places(
    responses: torch.Tensor, lengths: torch.Tensor, count: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each response token's packed position, its row, and its place within its response (`count`: how many response
    tokens there are, where the caller knows: without it, finding out waits for the device)."""
    every_row = torch.arange(len(lengths), device=lengths.device)
    rows = torch.repeat_interleave(every_row, responses, output_size=count)
    nth = torch.arange(len(rows), device=lengths.device) - (responses.cumsum(dim=0) - responses)[rows]
    return (lengths.cumsum(dim=0) - responses - 1)[rows] + nth, rows, nth
