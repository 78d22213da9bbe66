"""Each built-in reward function against hand-worked cases, and the registry that names them."""

import inspect

import pytest

from trinity.config import rewards as registry
from trinity.config.workflows import DEFAULT_REWARDS
from trinity.runtime import workflows
from trinity.runtime.rewards import BoundReward, bind, load
from trinity.runtime.rewards._answers import equivalent, last_boxed, normalise
from trinity.runtime.rewards.accuracy_reward import accuracy_reward
from trinity.runtime.rewards.countdown_reward import countdown_reward, evaluate
from trinity.runtime.rewards.exact_match import exact_match
from trinity.runtime.rewards.format_reward import format_reward
from trinity.runtime.rewards.math_boxed_reward import math_boxed_reward
from trinity.runtime.rewards.math_dapo_reward import math_dapo_reward, overlong_penalty
from trinity.runtime.rewards.math_reward import math_reward

# --- the registry -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(registry.REWARDS))
def test_every_name_resolves_to_a_function_whose_arguments_are_its_models(name):
    fn = load(name)
    assert callable(fn) and not isinstance(fn, type)
    params = inspect.signature(fn).parameters
    assert list(params)[:2] == ["response", "truth"]
    # every argument the model accepts is a keyword of the function, with the model's default
    model = registry.REWARDS[name].args
    for field, info in model.model_fields.items():
        assert params[field].default == info.default, f"{name}.{field}"
    taken = set(params) - {"response", "truth", "prompt", "response_tokens", "row", "messages"}
    assert taken == set(model.model_fields), f"{name}: the function takes arguments its model does not know"


def test_each_workflows_default_reward_is_a_registry_name_and_its_class_agrees():
    assert DEFAULT_REWARDS == {
        "math_workflow": "math_reward",
        "arith_workflow": "exact_match",
        "arith_feedback_workflow": "exact_match",
        "calculator_workflow": "exact_match",
        "react_agent_workflow": "exact_match",
        "async_math_workflow": "math_reward",
        "math_boxed_workflow": "math_boxed_reward",
        "async_math_boxed_workflow": "math_boxed_reward",
        "math_ruler_workflow": "math_reward",  # the reference's score, reported beside the judge's reward
    }
    for workflow, reward in DEFAULT_REWARDS.items():
        assert workflows.load(workflow).default_reward == reward and reward in registry.REWARDS


def test_names_that_need_a_model_are_refused_with_the_reason():
    assert set(registry.UNSUPPORTED_REWARDS) == {"rm_gallery_reward", "openjudge_multi_grader_reward"}
    assert not set(registry.UNSUPPORTED_REWARDS) & set(registry.REWARDS)
    with pytest.raises(ValueError, match="'rm_gallery_reward' is not supported by trinity: it scores with RM-Gallery"):
        load("rm_gallery_reward")


def test_a_users_reward_by_import_path_and_bad_ones():
    assert load("trinity.runtime.rewards.exact_match:exact_match") is exact_match
    with pytest.raises(ValueError, match="unknown reward function 'math_rewards'; built in: exact_match, math_reward"):
        load("math_rewards")
    with pytest.raises(ValueError, match="cannot import 'nowhere.mod:fn'"):
        load("nowhere.mod:fn")
    with pytest.raises(ValueError, match="trinity.runtime.rewards:BoundReward is not a function"):
        load("trinity.runtime.rewards:BoundReward")
    with pytest.raises(ValueError, match="trinity.runtime.rewards:CONTEXT is not a function"):
        load("trinity.runtime.rewards:CONTEXT")


def test_bind_completes_a_builtins_arguments_and_checks_them():
    assert bind("math_boxed_reward", {"with_think": "true"}).args == {"with_think": True, "format_score_coef": 0.1}
    assert bind("trinity.runtime.rewards.exact_match:exact_match", {}).args == {}
    with pytest.raises(ValueError, match="'format_reward': bad reward_fn_args: .*not a regular expression"):
        bind("format_reward", {"pattern": "(unclosed"})


def test_a_reward_must_return_named_numbers():
    assert BoundReward("n", lambda response, truth: 2, {})("a", "b") == {"reward": 2.0}
    with pytest.raises(TypeError, match="reward function 'bad' returned 'yes', not a dict of named numbers"):
        BoundReward("bad", lambda response, truth: "yes", {})("a", "b")
    with pytest.raises(TypeError, match="returned {'ok': 'yes'}"):
        BoundReward("bad", lambda response, truth: {"ok": "yes"}, {})("a", "b")


# --- answers and their normalisation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,boxed",
    [
        ("so \\boxed{\\frac{1}{2}} then \\boxed{3}", "3"),  # the last one
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # nested braces
        ("\\fbox{7}", "7"),
        ("\\boxed 5$ and", "5"),
        ("\\boxed{unclosed", None),  # a cut-off response has no answer
        ("no box", None),
    ],
)
def test_the_last_boxed_answer(text, boxed):
    assert last_boxed(text) == boxed


@pytest.mark.parametrize(
    "raw,canonical",
    [
        ("$1,234.00$", "1234"),
        ("\\$18.50.", "18.50"),
        ("\\dfrac12", "\\frac{1}{2}"),
        ("\\tfrac{3}{4}", "\\frac{3}{4}"),
        ("\\frac1{4}", "\\frac{1}{4}"),
        ("3/4", "\\frac{3}{4}"),
        ("\\left( 1, 2 \\right)", "1,2"),
        ("x = 5", "5"),
        ("90^\\circ", "90"),
        ("\\text{12 cm}", "12"),
        ("50\\%", "50"),
        ("\\sqrt2", "\\sqrt{2}"),
        (".5", "0.5"),
        ("{7}", "7"),
        ("(1,2)", "1,2"),
        ("(a)+(b)", "(a)+(b)"),  # not one bracketed answer: kept
        ("1,000,000", "1000000"),
    ],
)
def test_normalisation(raw, canonical):
    assert normalise(raw) == canonical


@pytest.mark.parametrize(
    "a,b,same",
    [
        ("0.5", "\\frac{1}{2}", True),
        ("1/2", "\\dfrac{1}{2}", True),
        ("-\\frac{3}{2}", "-1.5", True),
        ("1,234", "1234.0", True),
        ("0.333", "\\frac{1}{3}", False),  # exact numbers, no tolerance
        ("2x+1", "1+2x", False),  # no symbolic algebra
        ("", "", False),  # nothing is no answer
        (None, "1", False),
    ],
)
def test_equivalence(a, b, same):
    assert equivalent(a, b) is same


# --- each reward function -----------------------------------------------------------------------------------------


def test_exact_match():
    assert exact_match(" 42\n", "42") == {"accuracy": 1.0}
    assert exact_match("42.0", "42") == {"accuracy": 0.0}
    assert exact_match("7", 7) == {"accuracy": 1.0}  # a numeric column compares as text


def test_math_reward_is_trinitys_gsm8k_check_with_its_format_bonus():
    truth = "48/2 = 24 clips\n#### 1,234"
    assert math_reward("The answer is $1,234.00.", truth) == {"accuracy": 1.0, "format_score": 0.0}
    assert math_reward("#### 1234", truth, format_reward=0.2) == {"accuracy": 1.0, "format_score": 0.2}
    assert math_reward("\\boxed{1235}", truth, format_reward=0.2) == {"accuracy": 0.0, "format_score": 0.2}
    assert math_reward("no idea", truth) == {"accuracy": 0.0, "format_score": 0.0}
    assert math_reward("12", "no number") == {"accuracy": 0.0, "format_score": 0.0}
    assert math_reward("#### 3\nthen 4", "#### 3") == {"accuracy": 1.0, "format_score": 0.0}


@pytest.mark.parametrize(
    "response,truth,accuracy",
    [
        ("so \\boxed{\\dfrac{1}{2}}", "\\boxed{\\frac12}", 1.0),
        ("so \\boxed{0.5}", "1/2", 1.0),
        ("it is 72 in all", "Natalia sold 24 clips.\n#### 72", 1.0),  # the last number against what follows ####
        ("\\boxed{72}, not 80", "#### 72", 1.0),  # the box wins over a later number
        ("\\boxed{73}", "72", 0.0),
        ("nothing", "72", 0.0),
    ],
)
def test_accuracy_reward(response, truth, accuracy):
    assert accuracy_reward(response, truth) == {"accuracy": accuracy}


def test_format_reward():
    good = "<think>\nadd them\n</think>\n<answer>\n42\n</answer>"
    assert format_reward(good) == {"format_score": 0.1}
    assert format_reward(good.replace("<answer>\n", "<answer>")) == {"format_score": -0.1}  # tag not on its own line
    assert format_reward("42") == {"format_score": -0.1}
    assert format_reward("ANSWER: 42", pattern=r"ANSWER: \d+$") == {"format_score": 0.1}
    assert format_reward("so ANSWER: 42", pattern=r"ANSWER: \d+$") == {"format_score": -0.1}  # from the start


PUZZLE = '{"target": 24, "numbers": [3, 8, 2, 1]}'


@pytest.mark.parametrize(
    "response,scores",
    [
        ("thinking...\n<answer>(3 * 8) * (2 - 1)</answer>", {"accuracy": 1.0, "format_score": 0.0}),
        ("<answer>3 * 8 / (2 - 1)</answer>", {"accuracy": 1.0, "format_score": 0.0}),
        ("<answer>3 * 8 + 2 - 1</answer>", {"accuracy": 0.0, "format_score": 0.1}),  # 25
        ("<answer>3 * 8</answer>", {"accuracy": 0.0, "format_score": 0.1}),  # not every number
        ("<answer>3 * 8 * 1 * 1</answer>", {"accuracy": 0.0, "format_score": 0.1}),  # 1 twice, no 2
        ("<answer>(3 * 8) ** (2 - 1)</answer>", {"accuracy": 0.0, "format_score": 0.1}),  # no powers
        ("<answer>3 * 8 / (2 - 2 + 1)</answer>", {"accuracy": 0.0, "format_score": 0.1}),
        ("<answer>3 * 8 * (2 - 1) x</answer>", {"accuracy": 0.0, "format_score": 0.1}),  # not arithmetic
        ("<answer>(3 * 8) * (2 - 1)</answer>\nthat is it", {"accuracy": 0.0, "format_score": 0.0}),  # not last line
        ("24", {"accuracy": 0.0, "format_score": 0.0}),
    ],
)
def test_countdown_reward(response, scores):
    assert countdown_reward(response, PUZZLE) == scores


def test_countdown_reads_a_dict_reference_and_names_a_bad_one():
    assert countdown_reward("<answer>1 + 2</answer>", {"target": 3, "numbers": [2, 1]})["accuracy"] == 1.0
    with pytest.raises(ValueError, match="a countdown reference is"):
        countdown_reward("<answer>1</answer>", {"target": 3})


@pytest.mark.parametrize(
    "text,value",
    [("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("-4 / 8", -0.5), ("1 / 0", None), ("2 ** 3", None), ("7 // 2", None)],
)
def test_countdown_evaluates_only_arithmetic(text, value):
    assert evaluate(text) == value


def test_math_boxed_reward():
    assert math_boxed_reward("\\boxed{\\tfrac{1}{2}}", "The answer is \\boxed{0.5}") == {
        "accuracy": 1.0,
        "format_score": 0.0,
    }
    assert math_boxed_reward("\\boxed{12}", "12") == {"accuracy": 1.0, "format_score": 0.0}  # a plain reference
    assert math_boxed_reward("12", "12") == {"accuracy": 0.0, "format_score": 0.0}  # no box, no answer
    thought = "<think>a</think> \\boxed{12}"
    assert math_boxed_reward(thought, "12", with_think=True) == {"accuracy": 1.0, "format_score": 0.0}
    assert math_boxed_reward("\\boxed{12}", "12", with_think=True) == {"accuracy": 1.0, "format_score": -0.1}
    twice = "<think>a</think><think>b</think>\\boxed{12}"
    assert math_boxed_reward(twice, "12", with_think=True, format_score_coef=0.3)["format_score"] == -0.3
    backwards = "</think>a<think>\\boxed{12}"
    assert math_boxed_reward(backwards, "12", with_think=True)["format_score"] == -0.1


def test_math_dapo_reward_reads_after_the_reasoning():
    assert math_dapo_reward("<think>\\boxed{5}</think> so \\boxed{7}", "7", 10)["accuracy"] == 1.0
    assert math_dapo_reward("<think>\\boxed{7}</think> so \\boxed{5}", "7", 10)["accuracy"] == 0.0
    assert math_dapo_reward("<think>...</think> 7", "7", 10)["accuracy"] == 1.0  # no box: the text after
    assert math_dapo_reward("\\boxed{7}", "7", 10) == {"accuracy": 1.0, "incorrect": 0.0, "format_score": 0.0}
    wrong = math_dapo_reward("\\boxed{5}", "7", 10)
    assert wrong == {"accuracy": 0.0, "incorrect": -1.0, "format_score": 0.0}  # DAPO's -1; the metric stays 0


@pytest.mark.parametrize(
    "tokens,penalty",
    [(0, 0.0), (60, 0.0), (70, -0.25), (80, -0.5), (100, -1.0), (101, -1.0), (500, -1.0)],
)
def test_dapos_overlong_penalty_grows_linearly_over_the_cache(tokens, penalty):
    # max 100, cache 40: free up to 60 tokens, the whole factor from 100 on
    assert overlong_penalty(tokens, 100, 40, 1.0) == pytest.approx(penalty)
    args = {"enable_overlong_penalty": True, "penalty_factor": 1.0, "max_response_length": 100, "cache_length": 40}
    assert math_dapo_reward("\\boxed{1}", "1", tokens, **args)["format_score"] == pytest.approx(penalty)


def test_your_own_rewards_arguments_must_be_keywords_it_takes():
    from trinity.runtime.rewards import bind

    assert bind("tests.runtime.own_rewards:length_reward", {"per_char": 2.0})("abc", None) == {"length": 6.0}
    with pytest.raises(ValueError, match=r"reward_fn_args \['per_chr'\] do not fit it: .*per_chr"):
        bind("tests.runtime.own_rewards:length_reward", {"per_chr": 2.0})
