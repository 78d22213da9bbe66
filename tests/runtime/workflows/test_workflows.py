"""Final-answer extraction, the default rewards of the built-in workflows, and the reward a task is given."""

import pytest

from trinity.config.schema.buffer import FormatConfig
from trinity.runtime.rewards import bind
from trinity.runtime.rewards.math_reward import final_answer, normalise
from trinity.runtime.workflows import Completion, Task, load


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


def task(row, repeat=3, reward_fn=None, **reward_args):
    return Task(
        "gsm8k/train/0",
        row,
        FormatConfig(prompt_key="question", response_key="answer"),
        repeat,
        reward_fn_args=reward_args,
        reward_fn=reward_fn,
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
        load("trinity.runtime.workflows.base:Task")


def test_a_workflow_scores_with_the_reward_function_its_task_is_given():
    row = {"question": "Half of 3?", "answer": "\\boxed{\\frac{3}{2}}"}
    texts = ["it is \\boxed{1.5}", "#### 1.5", "\\boxed{3/2}"]
    # math_reward (the default) reads '####' and plain numbers, but not \frac: only the named reward gets these right
    assert [e.reward for e in load("math_workflow")(task(row), ScriptedModel(texts)).run()] == [0.0, 0.0, 0.0]
    boxed = bind("math_boxed_reward", {"with_think": True, "format_score_coef": 0.25})
    exps = load("math_workflow")(task(row, reward_fn=boxed), ScriptedModel(texts)).run()
    assert [e.reward for e in exps] == [0.75, -0.25, 0.75]  # accuracy + the missing-<think> penalty
    assert [e.metrics["accuracy"] for e in exps] == [1.0, 0.0, 1.0]
    assert [e.metrics["format_score"] for e in exps] == [-0.25] * 3
    # the arithmetic workflow takes a reward too, instead of its exact match
    arith = Task(
        "t", {"question": "7*6=", "answer": "42"}, FormatConfig(prompt_key="question", response_key="answer"), 2
    )
    assert [e.reward for e in load("arith_workflow")(arith, ScriptedModel(["forty: 42", "42"])).run()] == [0.0, 1.0]
    named = Task(**{**arith.__dict__, "reward_fn": bind("accuracy_reward", {})})
    assert [e.reward for e in load("arith_workflow")(named, ScriptedModel(["forty: 42", "42"])).run()] == [1.0, 1.0]


def test_a_reward_function_gets_the_context_it_names():
    seen = []

    def mine(response, truth, response_tokens, prompt, bonus=0.0):
        seen.append((response, truth, response_tokens, prompt))
        return {"accuracy": 1.0, "bonus": bonus}

    from trinity.runtime.rewards import BoundReward

    exps = load("math_workflow")(
        task({"question": "q?", "answer": "1"}, 1, BoundReward("mine", mine, {"bonus": 0.5})), ScriptedModel(["x"])
    ).run()
    assert seen == [("x", "1", 1, "q?")]  # response_ids [3]: one token; the row is not asked for, so not passed
    assert exps[0].reward == 1.5 and exps[0].metrics == {"accuracy": 1.0, "bonus": 0.5}


def test_a_workflow_without_a_default_needs_the_taskset_to_name_a_reward():
    from trinity.runtime.workflows import Workflow

    class Mine(Workflow):
        def run(self):
            return [self.score(c, "1") for c in self.model.generate("", 1)]

    plain = task({"question": "q", "answer": "1"}, 1)
    with pytest.raises(
        ValueError, match="Mine has no reward function: name one in the taskset's default_reward_fn_type"
    ):
        Mine(plain, ScriptedModel(["1"])).run()
    named = task({"question": "q", "answer": "1"}, 1, reward_fn=bind("exact_match", {}))
    assert Mine(named, ScriptedModel(["1"])).run()[0].reward == 1.0
