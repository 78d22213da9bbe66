"""verl's mini- and micro-batch selection skipped where it would select every row in order: the batch itself where
so, else verl's; either way the same mini-batches and micro-batches (columns, settings, order, index lists) as verl's
own, and the same count on every rank of a data-parallel group."""

from typing import TYPE_CHECKING

import pytest
from hypothesis import assume, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from tests.runtime.trainer.spawn import two_ranks

if TYPE_CHECKING:
    from tensordict import TensorDict

torch = pytest.importorskip("torch")
pytest.importorskip("verl")


def batch(lengths: list[int], limit: int, **options) -> "TensorDict":
    """A packed batch as verl's update gets it: nested token ids and loss mask, per-row columns, its settings."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    nested = [torch.arange(n) + 100 * i for i, n in enumerate(lengths)]
    td = TensorDict(
        {
            "input_ids": torch.nested.as_nested_tensor(nested, layout=torch.jagged),
            "loss_mask": torch.nested.as_nested_tensor([t % 2 for t in nested], layout=torch.jagged),
            "row": torch.arange(len(lengths)),
            "old_log_probs": -torch.arange(len(lengths), dtype=torch.float32),
        },
        batch_size=[len(lengths)],
    )
    tu.assign_non_tensor(td, **{"max_token_len_per_gpu": limit, "use_dynamic_bsz": True, **options})
    return td


def same(ours: list, verls: list) -> None:
    """The same TensorDicts (every column, nested ones row by row, and every setting), in the same order."""
    from verl.utils import tensordict_utils as tu

    assert len(ours) == len(verls)
    for mine, theirs in zip(ours, verls):
        assert list(mine.keys()) == list(theirs.keys())
        tu.assert_tensordict_eq(mine, theirs)


def whole(made: list, td) -> bool:
    """Whether the one micro- or mini-batch made is the batch itself (its columns' very values), not a gather."""
    same_values = made[0]["input_ids"].values().data_ptr() == td["input_ids"].values().data_ptr()
    return len(made) == 1 and made[0]["row"] is td["row"] and same_values


@examples(max_examples=100, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=10),
    slack=st.integers(-30, 3),
    at_least=st.sampled_from([None, 0, 1, 2]),
    sp=st.sampled_from([1, 2]),
    group=st.sampled_from([1, 2]),
)
def test_the_micro_batches_are_verls(lengths, slack, at_least, sp, group):
    """Within the limit (max_token_len_per_gpu x sp_size: the tokens' sum + slack) and one micro-batch asked for at
    most: the batch itself, its rows in order; else verl's balancer's. Either way what verl's own would make."""
    from trinity.runtime.verl import whole_batch

    assume(len(lengths) % group == 0 and len(lengths) // group >= (at_least or 1))  # else verl's errors
    limit = max(max(lengths) * group, sum(lengths) + slack)
    options = {"sp_size": sp, "force_group_size": group}
    td = batch(lengths, -(-limit // sp), **options)
    ours = whole_batch.prepare_micro_batches(td, min_num_micro_batch=at_least)
    verls = whole_batch._VERL_MICRO_BATCHES(batch(lengths, -(-limit // sp), **options), min_num_micro_batch=at_least)
    same(ours[0], verls[0])
    assert ours[1] == verls[1]
    assert whole(ours[0], td) == (sum(lengths) <= -(-limit // sp) * sp and (at_least or 1) == 1)


def test_one_micro_batch_is_the_batchs_own_values_under_keys_of_its_own():
    """What a loss sets on its micro-batch (trainer/old_policy.py replaces old_log_probs) stays there."""
    from verl.utils import tensordict_utils as tu

    from trinity.runtime.verl import whole_batch

    td = batch([3, 5], 8)
    (micro,), order = whole_batch.prepare_micro_batches(td)
    assert order == [[0, 1]] and whole([micro], td)
    tu.assign_non_tensor(micro, sp_size=2)
    micro["old_log_probs"] = torch.zeros(2)
    assert td["old_log_probs"].tolist() == [0.0, -1.0] and tu.get_non_tensor_data(td, "sp_size", None) is None
    (_, _), order = whole_batch.prepare_micro_batches(batch([3, 5], 7))
    assert order == [[1], [0]]  # over the limit: verl's, heavier first


def test_a_batch_packed_by_verls_padding_is_handed_on_as_verls_gather_builds_it():
    """left_right_2_no_padding's token ids come over int32 offsets (unpad_input's), which verl's engine never saw:
    verl's gather builds every nested column over int64 ones, and so does the batch handed on."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    from trinity.runtime.verl import whole_batch

    mask = torch.ones(3, 5, dtype=torch.long)
    mask[0, 0] = 0  # a left-padded prompt
    columns = {"input_ids": torch.randint(1, 9, (3, 5)), "attention_mask": mask, "response_mask": mask[:, 2:].clone()}
    columns |= {"position_ids": (mask.cumsum(1) - 1).clamp(min=0), "prompts": mask[:, :2], "responses": mask[:, 2:]}
    td = left_right_2_no_padding(TensorDict(columns, batch_size=[3]))
    tu.assign_non_tensor(td, max_token_len_per_gpu=100, use_dynamic_bsz=True)
    assert td["input_ids"].offsets().dtype == torch.int32
    (micro,), _ = whole_batch.prepare_micro_batches(td)
    same([micro], [tu.index_select_tensor_dict(td, [0, 1, 2])])
    assert micro["input_ids"].offsets().dtype == torch.int64
    assert micro["input_ids"].values().data_ptr() == td["input_ids"].values().data_ptr()  # not a copy


def test_what_one_micro_batch_cannot_be_is_verls():
    """Fixed micro-batch sizes, two micro-batches asked of a pipeline, a nested column with holes: verl's, as it makes
    them; a group size that does not divide the rows, rows without tokens: verl's errors."""

    from trinity.runtime.verl import whole_batch

    fixed = batch([3, 5, 2, 2], 100, use_dynamic_bsz=False, micro_batch_size_per_gpu=2)
    ours, verls = whole_batch.prepare_micro_batches(fixed), whole_batch._VERL_MICRO_BATCHES(fixed)
    same(ours[0], verls[0])
    assert len(ours[0]) == 2 and ours[1] is None
    ours, verls = (
        f(batch([3, 5], 100), num_batches_divided_by=2)
        for f in (whole_batch.prepare_micro_batches, whole_batch._VERL_MICRO_BATCHES)
    )
    same(ours[0], verls[0])
    assert ours[1] == verls[1] and len(ours[0]) == 2
    holes = batch([3, 5], 100)
    offsets, lengths = torch.tensor([0, 5, 10]), torch.tensor([3, 5])  # row 0's last 2 values are not its
    holes["input_ids"] = torch.nested.nested_tensor_from_jagged(torch.arange(10), offsets, lengths=lengths)
    assert not holes["input_ids"].is_contiguous() and not whole(whole_batch.prepare_micro_batches(holes)[0], holes)
    with pytest.raises(AssertionError, match="divisible by force_group_size"):
        whole_batch.prepare_micro_batches(batch([3, 5, 2], 100, force_group_size=2))
    with pytest.raises(IndexError):  # rows without a token: verl makes no micro-batch, and indexes the first
        whole_batch.prepare_micro_batches(batch([0, 0], 100))


@pytest.mark.parametrize(
    ("size", "kwargs", "itself"),
    [(4, {"shuffle": False}, True), (4, None, True), (2, {"shuffle": False}, False), (4, {"shuffle": True}, False)],
    ids=["whole", "whole-no-kwargs", "halves", "shuffled"],
)
def test_the_mini_batches_are_verls(size, kwargs, itself):
    """The whole batch unshuffled (trinity's every step): the batch itself once per epoch, each a TensorDict of its
    own; smaller or shuffled mini-batches: verl's (the same seed, the same order)."""
    from trinity.runtime.verl import whole_batch

    td = batch([3, 5, 2, 4], 100)
    ours = list(whole_batch.make_iterator(td, size, 2, seed=7, dataloader_kwargs=kwargs))
    verls = list(whole_batch._VERL_ITERATOR(td, size, 2, seed=7, dataloader_kwargs=kwargs))
    same(ours, verls)
    assert all(whole([m], td) == itself for m in ours) and len(ours) == 2 * 4 // size
    assert len({id(m) for m in ours} | {id(td)}) == len(ours) + 1


def micro_batch_counts(rank: int, port: int, lengths: list[list[int]], out) -> None:
    """In a process of its own: rank `rank` of two in a gloo group, its micro-batches of `lengths[rank]` at limit 8."""
    import os

    import torch.distributed as dist

    from trinity.platforms import get_platform

    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), **get_platform("cpu").verl_env()}
    dist.init_process_group("gloo", rank=rank, world_size=2)
    # verl's cpu platform, which its env names (this module's importorskip imported verl before the env was set)
    import trinity.runtime.verl.cpu_platform  # noqa: F401
    from trinity.runtime.verl import whole_batch

    made, _ = whole_batch.prepare_micro_batches(batch(lengths[rank], 8), dp_group=dist.group.WORLD)
    out.put((rank, [len(m) for m in made]))
    dist.destroy_process_group()


def test_every_rank_of_a_group_makes_as_many_micro_batches():
    """verl gives every data-parallel rank the largest count of any: a rank whose rows fit one micro-batch makes two
    where another rank needs two, and one where every rank's fit."""
    assert two_ranks(micro_batch_counts, [[3, 5], [6, 6]]) == {0: [1, 1], 1: [1, 1]}
    assert two_ranks(micro_batch_counts, [[3, 4], [2, 2]]) == {0: [2], 1: [2]}
