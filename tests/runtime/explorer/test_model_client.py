"""The model client's prompt budget: a long prompt keeps its end (the question and the chat template's cue)."""

from hypothesis import given
from hypothesis import strategies as st

from trinity.runtime.explorer.model_client import fit_prompt

IDS = st.lists(st.integers(0, 50), max_size=40)


@given(IDS, st.integers(1, 40))
def test_a_prompt_keeps_its_last_tokens_within_the_budget(ids, limit):
    kept, cut = fit_prompt(ids, limit)
    assert kept == ids[len(ids) - len(kept) :] and len(kept) == min(len(ids), limit)
    assert cut == (len(ids) > limit)


@given(IDS)
def test_without_a_budget_every_prompt_goes_whole(ids):
    assert fit_prompt(ids, None) == (ids, False)
