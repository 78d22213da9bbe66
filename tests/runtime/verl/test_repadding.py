"""The responses' values of verl's no-padding layout, padded in one gather: for any prompt and response lengths,
packed or nested, the values and the gradient verl's `no_padding_2_padding` gives (that verl's losses call it:
test_engines.py)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("verl")

ROWS = st.lists(st.tuples(st.integers(1, 5), st.integers(0, 5)), min_size=1, max_size=6)


def batch(rows: list[tuple[int, int]], nested: bool, spare: int = 0):
    """The columns `no_padding_2_padding` reads for these (prompt, response) lengths: nested prompts and responses,
    or left-padded prompts and right-padded responses with the attention mask saying which, `spare` columns wider than
    the longest response (a micro-batch keeps its batch's width)."""
    from tensordict import TensorDict

    if nested:
        columns = {
            name: torch.nested.nested_tensor([torch.ones(row[i]) for row in rows], layout=torch.jagged)
            for i, name in enumerate(("prompts", "responses"))
        }
    else:
        width, longest = max(p for p, _ in rows), max(r for _, r in rows) + spare
        mask = [[0] * (width - p) + [1] * p + [1] * r + [0] * (longest - r) for p, r in rows]
        columns = {"prompts": torch.zeros(len(rows), width), "attention_mask": torch.tensor(mask)}
        columns["responses"] = torch.zeros(len(rows), longest)
    return TensorDict(columns, batch_size=[len(rows)])


@settings(max_examples=80, deadline=None)
@given(
    rows=ROWS,
    nested=st.booleans(),
    spare=st.integers(0, 2),
    trailing=st.sampled_from([(), (3,)]),
    as_nested=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
)
def test_the_values_and_gradient_are_verls_for_any_lengths(rows, nested, spare, trailing, as_nested, dtype):
    """Every (prompt, response) length, a response of none too, nested or padded rows (wider than their longest
    response too), values of any float dtype with a trailing dimension or none, given packed or as a nested tensor:
    the same padded values, dtype and gradient."""
    from verl.workers.utils.padding import no_padding_2_padding

    from trinity.runtime.verl.repadding import padded_responses

    lengths = torch.tensor([p + r for p, r in rows])
    gradients = []
    for read in (padded_responses, no_padding_2_padding):
        values = (torch.arange(int(lengths.sum()) * math.prod(trailing), dtype=dtype) + 1).view(-1, *trailing)
        values.requires_grad_(True)
        given = (
            torch.nested.nested_tensor_from_jagged(values, torch.cat([lengths.new_zeros(1), lengths.cumsum(0)]))
            if as_nested and not trailing
            else values
        )
        out = read(given, batch(rows, nested, spare))
        (out * torch.arange(out.numel(), dtype=dtype).view(out.shape)).sum().backward()
        gradients.append((out.detach(), values.grad))
    (ours, our_grad), (verls, verl_grad) = gradients
    assert ours.dtype == verls.dtype and torch.equal(ours, verls)
    assert torch.equal(our_grad, verl_grad)


@settings(max_examples=60, deadline=None)
@given(rows=ROWS, nested=st.booleans())
def test_the_positions_kept_are_those_verl_reads_the_responses_values_at(rows, nested):
    """The positions response_logits.py keeps hold exactly what `no_padding_2_padding` reads, row by row and in
    order, and the columns are those positions' within their rows."""
    from verl.workers.utils.padding import no_padding_2_padding

    from trinity.runtime.verl.repadding import response_positions

    data = batch(rows, nested)
    values = torch.arange(sum(p + r for p, r in rows), dtype=torch.float32) + 1
    read = no_padding_2_padding(values, data)
    packed, row, column = response_positions(data)
    starts = torch.tensor([0] + [p + r for p, r in rows]).cumsum(0)
    assert torch.equal(starts[row] + column, packed)
    kept = torch.zeros_like(read)
    for r in range(len(rows)):
        taken = values[packed[row == r]]
        kept[r, : len(taken)] = taken
    assert torch.equal(kept, read)


def test_the_width_of_nested_rows_is_the_batchs_own_where_it_says_one():
    """Nested rows: as wide as the batch says (`max_response_len`, verl's unpadding sets it), else the longest
    response."""
    from verl.utils import tensordict_utils as tu

    from trinity.runtime.verl.repadding import padded_responses

    data = batch([(2, 1), (1, 3)], nested=True)
    values = torch.arange(7.0)
    assert padded_responses(values, data).tolist() == [[1.0, 0.0, 0.0], [3.0, 4.0, 5.0]]
    tu.assign_non_tensor_data(data, "max_response_len", 5)
    assert padded_responses(values, data).shape == (2, 5)


def test_a_batch_whose_values_do_not_fit_it_is_refused_saying_why():
    """verl asserts both: packed values of another token count, and a row without a prompt (its first response
    value would be the row before's)."""
    from trinity.runtime.verl.repadding import padded_responses

    with pytest.raises(ValueError, match="the batch has 7 tokens but the packed values 6"):
        padded_responses(torch.zeros(6), batch([(2, 1), (1, 3)], nested=True))
    with pytest.raises(ValueError, match="1 rows of the batch have an empty prompt"):
        padded_responses(torch.zeros(4), batch([(0, 1), (1, 2)], nested=True))
