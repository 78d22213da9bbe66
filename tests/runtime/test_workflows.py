"""Final-answer extraction and the rewards of the built-in workflows."""

import pytest

from trinity.config.schema.buffer import FormatConfig
from trinity.runtime.workflows import Completion, Task, load
from trinity.runtime.workflows.math import final_answer, normalise


@pytest.mark.parametrize(
    "text,answer",
    [
        ("Natalia sold 48/2 = 24 clips in May.\n#### 72", "72"),
        ("so the total is \\boxed{1,234}.", "1234"),
        ("I think it is $18.00.", "18"),
        ("#### 3\nand later 4", "3"),  # the marked answer wins over a later number
        ("-5 degrees", "-5"),
        ("0.5 of it", "0.5"),
        ("no number here", None),
    ],
)
def test_final_answer(text, answer):
    assert final_answer(text) == answer


def test_normalise_keeps_text_that_is_no_number():
    assert normalise(" forty two. ") == "forty two"


class ScriptedModel:
    """Stands in for the rollout engines with fixed completions: this test is about scoring, not generating."""

    tokenizer = None

    def __init__(self, texts):
        self.texts = texts

    def prompt(self, task):
        return task.row["question"]

    def generate(self, prompt, n):
        return [Completion([1, 2], [3], [-0.1], text, weight_version=7) for text in self.texts[:n]]


def task(row, repeat=3, **reward_args):
    return Task(
        "gsm8k/train/0",
        row,
        FormatConfig(prompt_key="question", response_key="answer"),
        repeat,
        reward_fn_args=reward_args,
    )


def test_math_workflow_rewards_the_right_number_and_optionally_the_form():
    row = {"question": "2+2?", "answer": "2+2=4\n#### 4"}
    texts = ["It is 4.", "#### 4", "#### 5"]
    plain = load("math_workflow")(task(row), ScriptedModel(texts)).run()
    assert [e.reward for e in plain] == [1.0, 1.0, 0.0]
    formatted = load("math_workflow")(task(row, format_reward=0.1), ScriptedModel(texts)).run()
    assert [e.reward for e in formatted] == [1.0, 1.1, 0.1] and [e.metrics["accuracy"] for e in formatted] == [
        1.0,
        1.0,
        0.0,
    ]
    assert all(e.group == "gsm8k/train/0" and e.weight_version == 7 for e in formatted)


def test_arith_workflow_wants_exactly_the_answer():
    row = {"question": "12+30=", "answer": "42"}
    exps = load("arith_workflow")(
        Task("t", row, FormatConfig(prompt_key="question", response_key="answer"), 3),
        ScriptedModel(["42", "42 ", "420"]),
    ).run()
    assert [e.reward for e in exps] == [1.0, 1.0, 0.0]


def test_a_users_workflow_by_import_path_and_bad_names():
    assert load("trinity.runtime.workflows.arith:ArithWorkflow").__name__ == "ArithWorkflow"
    with pytest.raises(ValueError, match="cannot import 'nowhere.mod:Flow'"):
        load("nowhere.mod:Flow")
    with pytest.raises(ValueError, match="is not a subclass of trinity.runtime.workflows.Workflow"):
        load("trinity.runtime.workflows.math:final_answer")
