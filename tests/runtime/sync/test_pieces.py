"""Pieces of a sync: runs of one dtype, each as full as the bound allows, cut alike from tensors and from their
specs, and a flat buffer split back into the tensors it holds."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")


@given(
    st.lists(st.tuples(st.integers(1, 40), st.sampled_from(["float32", "bfloat16"])), max_size=12),
    st.integers(1, 100),
)
def test_pieces_are_runs_of_one_dtype_each_as_full_as_the_limit_allows(items, limit):
    from trinity.runtime.sync import pieces

    cut = list(pieces.cut(items, lambda item: (item[1], item[0]), limit))  # an item is (bytes, dtype)
    assert [item for piece in cut for item in piece] == items  # every item once, in order
    for piece, after in zip(cut, [*cut[1:], None]):
        assert len({d for _, d in piece}) == 1
        assert len(piece) == 1 or sum(n for n, _ in piece) <= limit  # one larger than the limit goes alone
        if after:  # the next item did not fit: another dtype, or past the limit
            assert after[0][1] != piece[0][1] or sum(n for n, _ in piece) + after[0][0] > limit


@given(
    st.lists(
        st.tuples(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.sampled_from(["float32", "bfloat16"])),
        min_size=1,
        max_size=10,
    ),
    st.integers(1, 200),
)
def test_specs_and_tensors_are_cut_alike_and_a_flat_piece_splits_back(shapes, limit):
    """The driver plans pieces from specs; the trainer cuts its tensors; the engines split a flat buffer by the plan."""
    from trinity.runtime.rollout.base import WeightSpec
    from trinity.runtime.sync import pieces

    tensors = [torch.randn(shape).to(getattr(torch, dtype)) for shape, dtype in shapes]
    specs = [WeightSpec(f"w{i}", tuple(t.shape), dtype) for i, (t, (_, dtype)) in enumerate(zip(tensors, shapes))]
    planned = pieces.plan(specs, limit)
    cut = list(pieces.tensors(tensors, limit))
    assert [len(p) for p in planned] == [len(p) for p in cut]
    for piece_specs, piece in zip(planned, cut):
        back = pieces.split(pieces.flatten(piece), [s.shape for s in piece_specs])
        assert all(torch.equal(a, b) for a, b in zip(back, piece))


def test_a_plain_spec_crossing_collective_rpc_is_planned_as_its_weight_spec():
    from trinity.runtime.rollout.base import WeightSpec
    from trinity.runtime.sync import pieces

    spec = WeightSpec("w", (3, 4), "bfloat16")
    assert pieces.plan([spec.plain()], 24) == [[spec.plain()]] and pieces.plan([spec], 24) == [[spec]]
    assert pieces.plan([spec.plain(), spec.plain()], 48) == [[spec.plain(), spec.plain()]]  # 24 bytes each
    assert len(pieces.plan([spec.plain(), spec.plain()], 47)) == 2


def test_a_planned_piece_is_filled_in_its_specs_dtype_from_tensors_that_come_one_at_a_time():
    """device_ipc: the buffer is allocated from the plan before the weights are gathered, each cast as it is copied in
    (an fp32 trainer's weights into a bf16 rollout's piece)."""
    from trinity.runtime.rollout.base import WeightSpec
    from trinity.runtime.sync import pieces

    weights = [torch.randn(3, 2), torch.randn(4)]
    specs = [WeightSpec("a", (3, 2), "bfloat16"), WeightSpec("b", (4,), "bfloat16")]
    taken = []

    def gathered():
        for weight in weights:
            taken.append(weight)
            yield weight

    flat = pieces.filled(specs, gathered(), "cpu")
    assert flat.dtype == torch.bfloat16 and flat.shape == (10,) and len(taken) == 2
    back = pieces.split(flat, [s.shape for s in specs])
    assert all(torch.equal(b, w.to(torch.bfloat16)) for b, w in zip(back, weights))
    with pytest.raises(ValueError, match="a piece of 10 values was given 6"):
        pieces.filled(specs, iter(weights[:1]), "cpu")
