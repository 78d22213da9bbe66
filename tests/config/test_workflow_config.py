"""`trinity config validate` on Trinity-RFT's workflows, rewards and algorithms of its example configs: the names
accepted, each workflow's workflow_args (and a reward function named among them, with its own arguments) and each
reward's and loss's arguments checked by their models, every error at the file:line:col where the value is written
(exit 2); a workflow's missing package a warning here and an error before a run; what stays unsupported refused."""

import importlib.util

import pytest

from tests.conftest import MINIMAL
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.config.workflow_checks import workflow_issues
from trinity.runtime.workflows import load


def config(workflow: str, taskset: str = "", explorer_input: str = "", algorithm: str = "") -> str:
    """A GRPO run of one taskset of `workflow`, with these lines added (indented as written)."""
    return (
        MINIMAL
        + "algorithm:\n  repeat_times: 4\n"
        + algorithm
        + "buffer:\n  explorer_input:\n    taskset:\n      path: TASKS\n"
        + taskset
        + f"    default_workflow_type: {workflow}\n"
        + explorer_input
        + "  trainer_input:\n    experience_buffer: {name: e}\n"
    )


def validate(cli, write, text: str):
    tasks = write("tasks.jsonl", '{"prompt": "1+2=", "response": "3", "size": 4, "seed": 1}\n')
    return cli("config", "validate", "-c", write("run.yaml", text.replace("TASKS", str(tasks))), "hardware=cpu")


LAKE_ARGS = (
    "      workflow_args:\n        env_max_steps: 8\n        agent_max_steps: 10\n        is_slippery: false\n"
    "        reward_fn_type: trajectory_accuracy_grader_reward\n"
    "        reward_fn_args:\n          model_name: qwen3-max\n          judge_api_base_url_env: OPENAI_BASE_URL\n"
    "          normalize_score: true\n          score_min: 1.0\n          score_max: 3.0\n"
)
JUDGE = (
    "    default_reward_fn_type: trajectory_accuracy_grader_reward\n",
    "      reward_fn_args:\n        model_name: qwen3-max\n        judge_api_key_env: OPENAI_API_KEY\n"
    "        normalize_score: true\n        score_min: 1.0\n        score_max: 3.0\n",
)


@pytest.mark.parametrize(
    "text",
    [
        config(
            "math_boxed_workflow",
            "      workflow_args: {use_base: true}\n",
            "    default_reward_fn_type: math_dapo_reward\n",
        ),
        config("async_math_workflow", "", "    default_reward_fn_type: math_boxed_reward\n"),
        config("math_rm_workflow", JUDGE[1], JUDGE[0]),  # examples/grpo_gsm8k_openjudge's
        config("frozen_lake_workflow", LAKE_ARGS),  # examples/grpo_frozenlake_openjudge's
        config(
            "math_workflow",
            "      reward_fn_args:\n        weights: {format: 0.5, accuracy: 0.5, brier: 0.5, mean_confidence: 1.0e-5, "
            "confidence_one_or_zero: 1.0e-5}\n",
            "    default_reward_fn_type: rlcr_reward\n",
        ),
        config(
            "math_workflow",
            algorithm="  algorithm_type: m2po\n  policy_loss_fn_args:\n    m2_threshold: 0.04\n"
            "    log_ratio_clip: 20.0\n",
        ),
        config(
            "step_wise_alfworld_workflow",
            "      workflow_args: {max_env_steps: 30}\n",
            algorithm="  algorithm_type: gigpo\n",
        ),
    ],
    ids=["math_boxed", "async_math", "math_rm_judge", "frozen_lake_judge", "rlcr", "m2po", "alfworld"],
)
def test_the_examples_workflows_rewards_and_algorithms_validate(cli, write, text):
    result = validate(cli, write, text)
    assert result.code == 0, result.err
    assert "valid for cpu" in result.out


@pytest.mark.parametrize(
    "text,line",
    [
        (
            config("step_wise_alfworld_workflow", "      workflow_args:\n        max_env_steps: 0\n"),
            "error: run.yaml:10:9: buffer.explorer_input.taskset.workflow_args.max_env_steps: input should be greater "
            "than 0 (got 0) (workflow 'step_wise_alfworld_workflow')",
        ),
        (
            config("math_boxed_workflow", "      workflow_args:\n        use_base: maybe\n"),
            "error: run.yaml:10:9: buffer.explorer_input.taskset.workflow_args.use_base: input should be a valid "
            "boolean, unable to interpret input (got 'maybe') (workflow 'math_boxed_workflow')",
        ),
        (
            config("math_boxed_workflow", "      workflow_args:\n        use_bse: true\n"),
            "error: run.yaml:10:9: buffer.explorer_input.taskset.workflow_args.use_bse: unknown key (workflow "
            "'math_boxed_workflow')\n    allowed: use_base, with_think, format_score_coef\n    hint: did you mean "
            "'use_base'?",
        ),
        (
            config("frozen_lake_workflow", "      workflow_args:\n        desc: [SF, FF]\n"),
            "error: run.yaml:10:9: buffer.explorer_input.taskset.workflow_args.desc: value error, a lake has exactly "
            "one start (S) and one goal (G)",
        ),
        (
            config("frozen_lake_workflow", "      workflow_args:\n        reward_fn_type: judge_reward\n"),
            "error: run.yaml:10:9: buffer.explorer_input.taskset.workflow_args.reward_fn_type: unknown reward function "
            "'judge_reward' (workflow 'frozen_lake_workflow')",
        ),
        (
            config("frozen_lake_workflow", LAKE_ARGS.replace("score_max: 3.0", "score_max: 1.0")),
            "error: run.yaml:14:9: buffer.explorer_input.taskset.workflow_args.reward_fn_args: value error, score_max "
            "(1.0) must be above score_min (1.0) (reward function 'trajectory_accuracy_grader_reward') (workflow "
            "'frozen_lake_workflow')",
        ),
        (
            config("frozen_lake_workflow", LAKE_ARGS.replace("model_name: qwen3-max", "model: qwen3-max")),
            "error: run.yaml:15:11: buffer.explorer_input.taskset.workflow_args.reward_fn_args.model: unknown key",
        ),
        (
            config("math_rm_workflow", JUDGE[1].replace("score_min: 1.0", "score_min: low"), JUDGE[0]),
            "error: run.yaml:13:9: buffer.explorer_input.taskset.reward_fn_args.score_min: input should be a valid "
            "number, unable to parse string as a number (got 'low') (reward function "
            "'trajectory_accuracy_grader_reward')",
        ),
        (
            config(
                "math_workflow",
                "      reward_fn_args:\n        weights: {format: 1.0}\n",
                "    default_reward_fn_type: rlcr_reward\n",
            ),
            "error: run.yaml:10:9: buffer.explorer_input.taskset.reward_fn_args.weights: value error, weights names "
            "all five parts",
        ),
        (
            config("math_workflow", algorithm="  algorithm_type: m2po\n  policy_loss_fn_args:\n    m2_threshold: -1\n"),
            "error: run.yaml:7:5: algorithm.policy_loss_fn_args.m2_threshold: input should be greater than or equal "
            "to 0 (got -1)",
        ),
        (
            config(
                "math_workflow",
                algorithm="  algorithm_type: m2po\n  policy_loss_fn_args:\n    loss_agg_mode: seq-mean-token-sum\n",
            ),
            "error: run.yaml:7:5: algorithm.policy_loss_fn_args.loss_agg_mode: input should be 'token-mean' (got "
            "'seq-mean-token-sum')",
        ),
    ],
    ids=[
        "alfworld_steps",
        "bool",
        "unknown_arg",
        "lake",
        "nested_reward_name",
        "nested_reward_range",
        "nested_reward_unknown_arg",
        "judge_arg",
        "rlcr_weights",
        "m2po_threshold",
        "m2po_token_mean",
    ],
)
def test_a_bad_argument_is_an_error_where_it_is_written(cli, write, text, line):
    result = validate(cli, write, text)
    assert result.code == 2, result.err
    assert line in result.err, result.err


def test_a_workflows_missing_package_is_a_warning_at_validate_and_an_error_before_a_run(cli, write, monkeypatch):
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gymnasium" else found(name, *a))
    result = validate(cli, write, config("frozen_lake_workflow"))
    assert result.code == 0, result.err
    said = (
        "warning: run.yaml:9:5: buffer.explorer_input.default_workflow_type: workflow 'frozen_lake_workflow' "
        "needs gymnasium (its lake is gymnasium's FrozenLakeEnv), which this Python cannot import\n    hint: pip "
        "install 'trinity[gym]' where the explorer runs"
    )
    assert said in result.err
    resolved = resolve(
        Request(
            config=write("run.yaml", config("frozen_lake_workflow").replace("TASKS", "t")).resolve(),
            overrides=("hardware=cpu",),
        )
    )
    (issue,) = workflow_issues(resolved)
    assert issue.severity == "error" and "needs gymnasium" in issue.message


def test_a_workflow_trinity_cannot_run_is_refused_by_name_with_the_reason(cli, write):
    result = validate(cli, write, config("intercode_sql_workflow"))
    assert result.code == 2
    assert (
        "default_workflow_type: workflow 'intercode_sql_workflow' is known to Trinity-RFT but not supported by "
        "trinity: it runs each task's SQL in InterCode's Docker container" in result.err
    )
    with pytest.raises(
        ValueError,
        match="'intercode_sql_workflow' is known to Trinity-RFT but not supported by trinity: "
        "it runs each task's SQL in InterCode's Docker container",
    ):
        load("intercode_sql_workflow")


def test_math_rm_workflow_without_a_reward_is_refused_where_the_taskset_is(cli, write):
    """It scores only with the reward its taskset names (Trinity-RFT's reward model or judge): none is an error."""
    result = validate(cli, write, config("math_rm_workflow"))
    assert result.code == 2
    assert (
        "buffer.explorer_input.taskset.default_reward_fn_type: workflow 'math_rm_workflow' scores with the reward its "
        "taskset names, and this taskset names none" in result.err
    )
    named = config("math_rm_workflow", taskset="      default_reward_fn_type: math_reward\n")
    assert validate(cli, write, named).code == 0


def test_a_judge_argument_upstream_takes_and_nothing_reads_is_noted(cli, write):
    """trajectory_accuracy_grader_reward's max_concurrency and reward_name: accepted (upstream's arguments) with a
    note that they change nothing; its other arguments get none."""
    judge_args = JUDGE[1] + "        max_concurrency: 4\n        reward_name: my_judge\n"
    result = validate(cli, write, config("math_rm_workflow", judge_args, JUDGE[0]))
    assert result.code == 0, result.err
    args = "buffer.explorer_input.taskset.reward_fn_args"
    assert f"{args}.max_concurrency: changes nothing: each call grades one conversation" in result.err
    assert f"{args}.reward_name: changes nothing: upstream's label of this reward" in result.err
    assert f"{args}.score_min: changes nothing" not in result.err
