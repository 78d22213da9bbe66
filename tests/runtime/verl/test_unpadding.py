"""verl's no-padding layout of a left-right padded batch without verl's loop over rows: every column, offsets, cached
lengths and setting as verl's `left_right_2_no_padding` leaves them, for any prompt and response lengths; batches of
another kind are verl's function's."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("verl")

ROWS = st.lists(st.tuples(st.integers(1, 6), st.integers(0, 5)), min_size=1, max_size=8)


def padded_batch(rows: list[tuple[int, int]], **extra):
    """A TensorDict as trinity's padded batch of these (prompt, response) lengths, with `extra` columns."""
    from tensordict import TensorDict

    from trinity.runtime.experience import Experience
    from trinity.runtime.trainer import batch as batches

    exps = [Experience(list(range(1, p + 1)), [7] * r, [-1.0] * r, 0.0, "g") for p, r in rows]
    if not any(r for _, r in rows):  # a batch has a response token somewhere
        exps[0] = Experience(exps[0].prompt_ids, [7], [-1.0], 0.0, "g")
    columns = batches.padded(exps, pad_id=0) | extra
    return TensorDict(columns, batch_size=[len(exps)])


def assert_same(ours, verls) -> None:
    from tensordict import NonTensorData

    assert list(ours.keys()) == list(verls.keys())
    for key in verls.keys():
        mine, theirs = ours.get(key), verls.get(key)
        if isinstance(theirs, NonTensorData):
            a, b = mine.data, theirs.data
            assert torch.equal(a, b) if isinstance(b, torch.Tensor) else a == b, key
        elif theirs.is_nested:
            assert torch.equal(mine.values(), theirs.values()), key
            assert torch.equal(mine.offsets(), theirs.offsets()) and mine.offsets().dtype == theirs.offsets().dtype
            cached = {k: v.shape for k, v in theirs._metadata_cache.items()}
            assert {k: v.shape for k, v in mine._metadata_cache.items()} == cached, key
        else:
            assert torch.equal(mine, theirs), key


@settings(max_examples=80, deadline=None)
@given(ROWS)
def test_the_layout_is_verls_for_any_lengths(rows):
    from verl.workers.utils.padding import left_right_2_no_padding

    from trinity.runtime.verl.unpadding import unpadded

    assert_same(unpadded(padded_batch(rows)), left_right_2_no_padding(padded_batch(rows)))


def test_a_batch_of_another_kind_is_verls_functions(monkeypatch):
    """Routed experts beside the token ids, or rope positions per section: verl unpads those too."""
    from trinity.runtime.verl import unpadding

    asked = []
    monkeypatch.setattr(unpadding, "left_right_2_no_padding", lambda data: asked.append(data) or data)
    experts = padded_batch([(2, 1), (3, 2)])
    experts["routed_experts"] = torch.zeros(experts["input_ids"].shape, dtype=torch.long)
    sections = padded_batch([(2, 1), (3, 2)])
    sections["position_ids"] = sections["position_ids"][:, None].expand(-1, 4, -1)
    plain = padded_batch([(2, 1), (3, 2)])
    for batch in (experts, sections, plain):
        unpadding.unpadded(batch)
    assert [id(batch) for batch in asked] == [id(experts), id(sections)]
