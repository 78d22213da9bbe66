"""A left-right padded batch in verl's no-padding layout: verl's `left_right_2_no_padding`, without its loop over rows.

verl 0.9.1 builds the nested position ids one row at a time (a boolean selection per row, then a nested tensor of
the list): about 2 ms of the demo's 128-row train step on 2 cores, more than the token ids' unpadding beside it. The
attended positions, taken in one selection, are the same values in the same order; the same offsets as the token
ids', as int64, and the rows' shortest and longest length cached on it, as verl's list constructor leaves them. The
rest is verl's own layout: the token ids from `unpad_input` (int32 offsets), `max_seq_len`, `max_response_len` and
`indices` beside them, `loss_mask` the response mask, the padded columns kept. A batch of another kind (rope
positions per section, routed experts, a top-k teacher) is verl's function's.
"""

import torch
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.workers.utils.padding import left_right_2_no_padding, unpad_input

_VERLS_ONLY = ("routed_experts", "teacher_logprobs", "teacher_ids")  # columns verl unpads beside the token ids


def unpadded(data: TensorDict) -> TensorDict:
    """`data` (input_ids, attention_mask, response_mask, position_ids: left-right padded) in verl's no-padding
    layout, in place, as verl's left_right_2_no_padding leaves it."""
    if data["position_ids"].dim() != 2 or any(key in data.keys() for key in _VERLS_ONLY):
        return left_right_2_no_padding(data)
    input_ids = data.pop("input_ids")
    attended = data["attention_mask"]
    tu.assign_non_tensor_data(data, "max_seq_len", input_ids.shape[1])
    tu.assign_non_tensor_data(data, "max_response_len", data["response_mask"].shape[1])
    ids, indices, offsets, *_ = unpad_input(input_ids.unsqueeze(-1), attended)
    tu.assign_non_tensor_data(data, "indices", indices)
    lengths = offsets.diff()
    data["input_ids"] = torch.nested.nested_tensor_from_jagged(ids.squeeze(-1), offsets=offsets)
    data["position_ids"] = torch.nested.nested_tensor_from_jagged(
        data["position_ids"][attended.bool()],
        offsets=offsets.long(),
        min_seqlen=int(lengths.min()),
        max_seqlen=int(lengths.max()),
    )
    data["loss_mask"] = data["response_mask"]
    return data
