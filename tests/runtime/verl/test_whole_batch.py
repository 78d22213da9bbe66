"""verl's mini- and micro-batch selection skipped where it would select every row in order: the same mini-batches and
micro-batches (rows, order, index lists) as verl's own, and the same count on every rank of a data-parallel group."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.runtime.trainer.spawn import two_ranks

torch = pytest.importorskip("torch")
pytest.importorskip("verl")


def batch(lengths: list[int], limit: int, **settings) -> "TensorDict":  # noqa: F821
    """A packed batch as verl's update gets it: nested token ids and loss mask, a per-row column, its settings."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    nested = [torch.arange(n) + 100 * i for i, n in enumerate(lengths)]
    td = TensorDict(
        {
            "input_ids": torch.nested.as_nested_tensor(nested, layout=torch.jagged),
            "loss_mask": torch.nested.as_nested_tensor([t % 2 for t in nested], layout=torch.jagged),
            "row": torch.arange(len(lengths)),
        },
        batch_size=[len(lengths)],
    )
    tu.assign_non_tensor(td, **{"max_token_len_per_gpu": limit, "use_dynamic_bsz": True, **settings})
    return td


def rows(td) -> list[tuple]:
    """Every row's token ids, loss mask and per-row column, and the settings: what a consumer of the batch reads."""
    from verl.utils import tensordict_utils as tu

    ids, mask = td["input_ids"].unbind(), td["loss_mask"].unbind()
    settings = {k: tu.get_non_tensor_data(td, k, None) for k in ("max_token_len_per_gpu", "use_dynamic_bsz")}
    return [(ids[i].tolist(), mask[i].tolist(), int(td["row"][i])) for i in range(len(td))] + [settings]


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=10),
    slack=st.integers(-30, 3),
    at_least=st.sampled_from([None, 1, 2]),
)
def test_the_micro_batches_are_verls(lengths, slack, at_least):
    """Within the limit (the tokens' sum + slack >= it), one micro-batch: the batch itself, its rows in order; else,
    or with two micro-batches asked for, verl's balancer's. Either way what verl's own would make."""
    from trinity.runtime.verl import whole_batch

    assume(len(lengths) >= (at_least or 1))  # fewer rows than micro-batches asked for is verl's error
    limit = max(max(lengths), sum(lengths) + slack)
    ours = whole_batch.prepare_micro_batches(batch(lengths, limit), min_num_micro_batch=at_least)
    verls = whole_batch._VERL_MICRO_BATCHES(batch(lengths, limit), min_num_micro_batch=at_least)
    assert [rows(m) for m in ours[0]] == [rows(m) for m in verls[0]]
    assert ours[1] == verls[1]


def test_one_micro_batch_is_the_batchs_own_tensors_under_keys_of_its_own():
    from verl.utils import tensordict_utils as tu

    from trinity.runtime.verl import whole_batch

    td = batch([3, 5], 8)
    (micro,), order = whole_batch.prepare_micro_batches(td)
    assert order == [[0, 1]] and micro["input_ids"] is td["input_ids"]
    tu.assign_non_tensor(micro, sp_size=2)
    micro["old_log_probs"] = torch.zeros(2)  # what a loss sets on its micro-batch (trainer/old_policy.py)
    assert "old_log_probs" not in td.keys() and tu.get_non_tensor_data(td, "sp_size", None) is None
    (_, _), order = whole_batch.prepare_micro_batches(batch([3, 5], 7))
    assert order == [[1], [0]]  # over the limit: verl's, heavier first


def test_fixed_micro_batch_sizes_and_a_group_size_that_does_not_divide_are_verls():
    from trinity.runtime.verl import whole_batch

    fixed = batch([3, 5, 2, 2], 100, use_dynamic_bsz=False, micro_batch_size_per_gpu=2)
    ours, verls = whole_batch.prepare_micro_batches(fixed), whole_batch._VERL_MICRO_BATCHES(fixed)
    assert [rows(m) for m in ours[0]] == [rows(m) for m in verls[0]] and len(ours[0]) == 2 and ours[1] is None
    with pytest.raises(AssertionError, match="divisible by force_group_size"):
        whole_batch.prepare_micro_batches(batch([3, 5, 2], 100, force_group_size=2))


@pytest.mark.parametrize(
    ("size", "kwargs"),
    [(4, {"shuffle": False}), (4, None), (2, {"shuffle": False}), (4, {"shuffle": True})],
    ids=["whole", "whole-no-kwargs", "halves", "shuffled"],
)
def test_the_mini_batches_are_verls(size, kwargs):
    """The whole batch unshuffled: the batch once per epoch, each a TensorDict of its own; smaller or shuffled
    mini-batches: verl's (the same seed, the same order)."""
    from trinity.runtime.verl import whole_batch

    td = batch([3, 5, 2, 4], 100)
    ours = list(whole_batch.make_iterator(td, size, 2, seed=7, dataloader_kwargs=kwargs))
    verls = list(whole_batch._VERL_ITERATOR(td, size, 2, seed=7, dataloader_kwargs=kwargs))
    assert [rows(m) for m in ours] == [rows(m) for m in verls] and len(ours) == 2 * 4 // size
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
