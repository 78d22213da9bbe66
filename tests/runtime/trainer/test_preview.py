"""trainer.enable_preview: a step's representative rollouts, as Trinity-RFT's representative_sample picks them."""

import pytest

from trinity.runtime.experience import Experience
from trinity.runtime.trainer.preview import representative


@pytest.fixture(scope="module")
def tokenizer(demo_assets):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(demo_assets / "model"))


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_the_lowest_and_the_highest_reward_rollout_decoded(tokenizer):
    exps = [
        Experience(ids(tokenizer, "1+1="), ids(tokenizer, "3"), reward=0.5),
        Experience(ids(tokenizer, "2+2="), ids(tokenizer, "4"), reward=1.0),
        Experience(ids(tokenizer, "3+3="), ids(tokenizer, "5"), reward=-1.0),
        Experience(ids(tokenizer, "9+9="), ids(tokenizer, "18"), reward=9.0, expert=True),  # an SFT sample of mix
    ]
    assert representative(exps, tokenizer, step=1) == [
        {"prompt": "3+3=", "response": "5", "reward": -1.0},
        {"prompt": "2+2=", "response": "4", "reward": 1.0},
    ]


def test_a_batch_without_rollouts_shows_one_sample_without_a_reward(tokenizer):
    samples = [Experience(ids(tokenizer, f"{i}+1="), ids(tokenizer, str(i + 1))) for i in range(4)]
    [row] = representative(samples, tokenizer, step=3, rollouts=False)
    assert set(row) == {"prompt", "response"} and row["prompt"] in {f"{i}+1=" for i in range(4)}
    assert representative(samples, tokenizer, step=3, rollouts=False) == [row]  # the step draws it
    assert representative([], tokenizer, step=1, rollouts=False) == []
    assert representative([], tokenizer, step=1) == []
