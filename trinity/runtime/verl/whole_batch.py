"""verl's mini- and micro-batch selection, skipped where it would select every row of the batch in order.

trinity trains each step's batch as one mini-batch of one epoch, in order (trainer/step.py's `_meta`), and a small
model's step often fits one micro-batch (trainer.max_token_len_per_gpu). verl 0.9.1 still selects both from the batch:
its mini-batch iterator (`tensordict_utils.make_iterator`) and its micro-batch balancer (`prepare_micro_batches`, which
first partitions the rows into one part by Karmarkar-Karp) each gather every column, a nested column unbound into its
rows and built again. On the demo's GRPO step (128 rows of ~10 tokens) the two took 12 % of the trainer rank's step
(py-spy, 2026-12-06). Where the selection is every row in order, each hands on the batch as that selection would give
it: a TensorDict of its own (keys set on it stay there) over the same values, which nothing in the update writes into,
each nested column over int64 offsets as verl's gather builds them (the batch's own, from padding's `unpad_input`, are
int32, which verl's engine never saw). Anything else (a shuffled or smaller mini-batch, fixed micro-batch sizes, more
than one micro-batch on any rank of the data-parallel group, a nested column with holes or ragged in another dimension)
is verl's.
"""

from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu
from verl.utils.device import get_device_name
from verl.workers.engine import utils as engine_utils
from verl.workers.engine.fsdp import transformer_impl

_VERL_ITERATOR = tu.make_iterator
_VERL_MICRO_BATCHES = engine_utils.prepare_micro_batches


def install() -> None:
    """verl's mini-batch iterator and its FSDP engine's micro-batching replaced by this module's (idempotent)."""
    tu.make_iterator = make_iterator
    transformer_impl.prepare_micro_batches = prepare_micro_batches


def make_iterator(
    tensordict: TensorDict, mini_batch_size: int, epochs: int, seed: int | None = None, dataloader_kwargs: Any = None
) -> Iterator[TensorDict]:
    """verl's `make_iterator`; where a mini-batch is the whole batch and not shuffled, the batch once per epoch."""
    whole = mini_batch_size == len(tensordict) and dataloader_kwargs in (None, {}, {"shuffle": False})
    if not whole or not _plain_nested(tensordict):
        return _VERL_ITERATOR(tensordict, mini_batch_size, epochs, seed=seed, dataloader_kwargs=dataloader_kwargs)
    return (_as_selected(tensordict) for _ in range(epochs))


def prepare_micro_batches(
    data: TensorDict,
    dp_group: Any = None,
    num_batches_divided_by: int | None = None,
    same_micro_num_in_dp: bool = True,
    min_num_micro_batch: int | None = None,
    use_dynamic_bsz_balance: bool = True,
) -> tuple[list[TensorDict], list[list[int]] | None]:
    """verl's `prepare_micro_batches`; where its balancer would make one micro-batch on every rank of `dp_group`
    (their micro-batch count is the largest of theirs), the batch itself and the index list of its rows in order."""
    one = _one_micro_batch(data, num_batches_divided_by, min_num_micro_batch)
    if _everywhere(one, dp_group, same_micro_num_in_dp):
        return [_as_selected(data)], [list(range(len(data)))]
    return _VERL_MICRO_BATCHES(
        data,
        dp_group=dp_group,
        num_batches_divided_by=num_batches_divided_by,
        same_micro_num_in_dp=same_micro_num_in_dp,
        min_num_micro_batch=min_num_micro_batch,
        use_dynamic_bsz_balance=use_dynamic_bsz_balance,
    )


def _one_micro_batch(data: TensorDict, divided_by: int | None, at_least: int | None) -> bool:
    """Whether verl's balancer would make this rank's rows one micro-batch: dynamic batch sizes, the rows' tokens
    together within max_token_len_per_gpu x the sequence-parallel size, no more micro-batches asked for, and rows with
    tokens (without, verl's error)."""
    if not tu.get_non_tensor_data(data=data, key="use_dynamic_bsz", default=True) or not _plain_nested(data):
        return False
    if (divided_by or 1) != 1 or (at_least or 1) != 1:
        return False
    if len(data) % tu.get_non_tensor_data(data=data, key="force_group_size", default=1):
        return False  # verl's error
    limit = data["max_token_len_per_gpu"] * tu.get_non_tensor_data(data=data, key="sp_size", default=1)
    return 0 < int(data["input_ids"].offsets()[-1]) <= limit


def _plain_nested(data: TensorDict) -> bool:
    """Whether the batch has packed token ids and only nested columns without holes, ragged in their first
    dimension after the rows (what `_as_selected` rebuilds as verl's gather would)."""
    nested = [c for c in data.values() if isinstance(c, torch.Tensor) and c.is_nested]
    ids = data.get("input_ids", None)
    if ids is None or not ids.is_nested:
        return False
    return all(c.is_contiguous() and getattr(c, "_ragged_idx", 1) == 1 for c in nested)


def _as_selected(data: TensorDict) -> TensorDict:
    """The batch as verl's selection of every row in order gives it, without gathering: a TensorDict of its own over
    the same values, each nested column a view of them over int64 offsets."""
    out = data.copy()
    for key, column in data.items():
        if isinstance(column, torch.Tensor) and column.is_nested and column.offsets().dtype != torch.int64:
            out[key] = torch.nested.nested_tensor_from_jagged(column.values(), column.offsets().long())
    return out


def _everywhere(one: bool, dp_group: Any, same_micro_num_in_dp: bool) -> bool:
    """Whether every rank of `dp_group` makes one micro-batch (`one`: this rank's answer), where verl makes their
    counts equal, else whether this rank does. Every rank asks before its batching, whatever its own answer, so the
    collective always pairs, and all then take the same path (verl's own collectives pair in turn)."""
    if (
        not (dist.is_initialized() and same_micro_num_in_dp and dp_group is not None)
        or dist.get_world_size(dp_group) == 1
    ):
        return one
    ones = torch.tensor([int(one)], device=get_device_name())
    dist.all_reduce(ones, op=dist.ReduceOp.MIN, group=dp_group)
    return bool(ones.item())
