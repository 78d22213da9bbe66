"""`trinity config validate` on reward functions: names against the registry, a built-in's arguments against its model,
each error at the file:line:col where the value is written."""

import pytest

from tests.conftest import MINIMAL
from trinity.config.rewards import REWARDS

ALLOWED = "allowed: " + ", ".join(REWARDS) + ", or module:function"


def config(explorer_input: str, taskset: str = "", eval_taskset: str = "") -> str:
    """A GRPO run over one math taskset and one evaluation taskset, with these lines added (indented as written)."""
    return (
        MINIMAL
        + "algorithm:\n  repeat_times: 4\nbuffer:\n  explorer_input:\n"
        + "    taskset:\n      path: TASKS\n"
        + taskset
        + "    eval_tasksets:\n      - path: TASKS\n"
        + eval_taskset
        + "    default_workflow_type: math_workflow\n"
        + explorer_input
        + "  trainer_input:\n    experience_buffer: {name: e}\n"
    )


def validate(cli, write, text: str):
    """`trinity config validate` of `text`, its tasksets a local file of one row."""
    tasks = write("tasks.jsonl", '{"prompt": "1+2=", "response": "3"}\n')
    return cli("config", "validate", "-c", write("run.yaml", text.replace("TASKS", str(tasks))), "hardware=cpu")


def test_an_unknown_reward_name_is_one_error_where_it_is_written_with_the_names_allowed(cli, write):
    result = validate(cli, write, config("    default_reward_fn_type: math_rewards\n"))
    assert result.code == 2, result.err
    # both tasksets fall back to the input's default: one error, on that line
    assert result.err.count("unknown reward function") == 1
    assert "error: run.yaml:12:5: buffer.explorer_input.default_reward_fn_type: unknown reward function " in result.err
    assert "'math_rewards'\n    " + ALLOWED + "\n    hint: did you mean 'math_reward'?" in result.err


def test_a_tasksets_own_unknown_reward_is_reported_on_its_own_line(cli, write):
    result = validate(cli, write, config("", eval_taskset="        default_reward_fn_type: bleu\n"))
    assert result.code == 2, result.err
    line = "error: run.yaml:11:9: buffer.explorer_input.eval_tasksets[0].default_reward_fn_type: unknown reward "
    assert line + "function 'bleu'" in result.err
    assert ALLOWED in result.err
    assert "hint: name a built-in reward function, your own as module:function, or null" in result.err


def test_a_reward_that_needs_a_model_is_refused_with_the_reason(cli, write):
    result = validate(cli, write, config("    default_reward_fn_type: rm_gallery_reward\n"))
    assert result.code == 2, result.err
    assert (
        "buffer.explorer_input.default_reward_fn_type: reward function 'rm_gallery_reward' is known to Trinity-RFT "
        "but not supported by trinity: it scores with RM-Gallery's reward models" in result.err
    )
    assert ALLOWED in result.err


@pytest.mark.parametrize("name", [*REWARDS, "my_rewards.module:score", "pkg.sub.mod:_private"])
def test_every_builtin_name_and_a_users_import_path_validate(cli, write, name):
    result = validate(cli, write, config(f"    default_reward_fn_type: {name}\n"))
    assert result.code == 0, result.err
    assert "reward" not in result.err


@pytest.mark.parametrize("name", ["my_rewards.module", "module:", ":fn", "a-b:fn", "mod:fn:extra"])
def test_an_import_path_of_the_wrong_form_is_unknown(cli, write, name):
    result = validate(cli, write, config(f"    default_reward_fn_type: '{name}'\n"))
    assert result.code == 2
    assert f"buffer.explorer_input.default_reward_fn_type: unknown reward function {name!r}" in result.err


def test_a_misspelt_reward_argument_is_an_error_at_its_key_with_the_arguments_allowed(cli, write):
    text = config(
        "    default_reward_fn_type: math_boxed_reward\n",
        taskset="      reward_fn_args:\n        with_thnk: true\n",
    )
    result = validate(cli, write, text)
    assert result.code == 2, result.err
    assert (
        "error: run.yaml:10:9: buffer.explorer_input.taskset.reward_fn_args.with_thnk: unknown key "
        "(reward function 'math_boxed_reward')\n    allowed: with_think, format_score_coef\n"
        "    hint: did you mean 'with_think'?" in result.err
    )


def test_a_bad_argument_value_and_the_workflows_default_reward_are_checked_too(cli, write):
    # no reward named: math_workflow's math_reward takes format_reward (a number); the eval set names its own
    text = config(
        "",
        taskset="      reward_fn_args: {format_reward: lots}\n",
        eval_taskset="        default_reward_fn_type: math_boxed_reward\n"
        "        reward_fn_args: {format_score_coef: -1}\n",
    )
    result = validate(cli, write, text)
    assert result.code == 2, result.err
    assert "buffer.explorer_input.taskset.reward_fn_args.format_reward: input should be a valid number" in result.err
    assert "run.yaml:9:24: buffer.explorer_input.taskset.reward_fn_args.format_reward" in result.err
    assert (
        "buffer.explorer_input.eval_tasksets[0].reward_fn_args.format_score_coef: input should be greater than or "
        "equal to 0 (got -1) (reward function 'math_boxed_reward')\n    allowed: >= 0" in result.err
    )


def test_a_reward_without_arguments_refuses_any(cli, write):
    text = config("    default_reward_fn_type: countdown_reward\n", taskset="      reward_fn_args: {target: 3}\n")
    result = validate(cli, write, text)
    assert result.code == 2, result.err
    assert (
        "buffer.explorer_input.taskset.reward_fn_args: reward function 'countdown_reward' takes no arguments\n"
        "    allowed: {}\n    hint: remove buffer.explorer_input.taskset.reward_fn_args" in result.err
    )


def test_dapos_overlong_penalty_needs_its_lengths(cli, write):
    text = config(
        "    default_reward_fn_type: math_dapo_reward\n",
        taskset="      reward_fn_args: {enable_overlong_penalty: true, penalty_factor: 1.0, cache_length: 100}\n",
    )
    result = validate(cli, write, text)
    assert result.code == 2, result.err
    assert (
        "buffer.explorer_input.taskset.reward_fn_args: value error, enable_overlong_penalty needs max_response_length"
        in result.err
    )
    ok = text.replace("cache_length: 100", "cache_length: 100, max_response_length: 400")
    assert validate(cli, write, ok).code == 0
    short = text.replace("cache_length: 100", "cache_length: 100, max_response_length: 100")
    assert "max_response_length must be greater than cache_length" in validate(cli, write, short).err


def test_a_users_reward_takes_any_arguments_and_a_user_workflow_is_not_checked(cli, write):
    text = config("    default_reward_fn_type: my.rewards:score\n", taskset="      reward_fn_args: {anything: 1}\n")
    assert validate(cli, write, text).code == 0
    text = config("", taskset="      default_workflow_type: my.flows:Flow\n      reward_fn_args: {anything: 1}\n")
    assert validate(cli, write, text).code == 0


def test_rewards_are_not_checked_when_nothing_explores(cli, write):
    text = config("    default_reward_fn_type: math_rewards\n").replace("algorithm:\n", "mode: train\nalgorithm:\n")
    result = validate(cli, write, text)
    assert "unknown reward function" not in result.err


def test_with_a_workflow_per_row_and_no_reward_named_the_args_are_left_to_each_rows_workflow(cli, write):
    args = "      reward_fn_args: {format_reward: 0.5}\n"
    per_row = "      format: {workflow_key: wf}\n" + args
    # arith_workflow's exact_match takes no arguments, but a row may name math_workflow, whose math_reward does
    text = config("", taskset=per_row).replace(
        "default_workflow_type: math_workflow", "default_workflow_type: arith_workflow"
    )
    assert validate(cli, write, text).code == 0
    result = validate(cli, write, text.replace(per_row, args))
    assert result.code == 2 and "reward function 'exact_match' takes no arguments" in result.err
