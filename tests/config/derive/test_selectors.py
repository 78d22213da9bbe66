"""Rules of trinity/config/derive/selectors.py: every data set's data_selector (and a taskset's deprecated
task_selector), through `trinity config render/validate` as a user runs them."""

import pytest

from tests.conftest import MINIMAL

RL = "algorithm:\n  repeat_times: 4\n"
INPUT = RL + "buffer:\n  explorer_input:\n    default_workflow_type: math_workflow\n"
TASKSET = INPUT + "    taskset:\n      path: /data/t\n"
EVAL = TASKSET.replace("    taskset:\n      path: /data/t\n", "    taskset: {path: /data/t}\n") + (
    "    eval_tasksets:\n      - path: /data/t\n"
)
SFT = "mode: train\nalgorithm:\n  algorithm_type: sft\nbuffer:\n  trainer_input:\n    experience_buffer:\n" + (
    "      name: sft\n      storage_type: file\n      path: /d\n"
)
OPS = "data_processor:\n  experience_pipeline:\n    operators: [{name: pass_rate_calculator}]\n"
DIFFICULTY = "        selector_type: difficulty_based\n        feature_keys: [weak, strong]\n"


def selector(head, body, key="data_selector"):
    return head + f"      {key}:\n" + body


def test_difficulty_based_takes_upstreams_defaults_and_learns_from_pass_rate_calculator(render):
    result, cfg = render(selector(TASKSET, DIFFICULTY + "        kwargs: {tau: 0.5}\n") + OPS)
    assert result.code == 0 and result.err == ""
    chosen = cfg["buffer"]["explorer_input"]["taskset"]["data_selector"]
    assert chosen == {
        "selector_type": "difficulty_based",
        "seed": 42,
        "feature_keys": ["weak", "strong"],
        "kwargs": {
            "m": 16,
            "lamb": 0.2,
            "rho": 0.2,
            "adaptive_rho": False,
            "do_sample": False,
            "target_reward": 1.0,
            "tau": 0.5,
        },
    }


def test_difficulty_based_without_pass_rate_calculator_is_warned_it_learns_nothing(render):
    result, _ = render(selector(TASKSET, DIFFICULTY))
    assert result.code == 0
    assert (
        "warning: run.yaml:11:9: buffer.explorer_input.taskset.data_selector.selector_type: difficulty_based learns "
        "from the pass rates the pass_rate_calculator experience operator feeds back, and no operator does"
        in result.err
    )
    assert "hint: add {name: pass_rate_calculator} to data_processor.experience_pipeline.operators" in result.err
    quiet, _ = render(selector(TASKSET, DIFFICULTY) + "mode: train\n")
    assert quiet.code == 0 and "warning" not in quiet.err  # nothing explores: nothing would feed it back anyway


@pytest.mark.parametrize("head", [EVAL, SFT])
def test_difficulty_based_where_nothing_feeds_back_is_noted(render, head):
    indent = "        " if head is EVAL else "      "
    result, _ = render(head + f"{indent}data_selector: {{selector_type: difficulty_based, feature_keys: [a, b]}}\n")
    assert result.code == 0, result.err
    assert "data_selector.selector_type: difficulty_based learns from the pass rates the explorer feeds back to " in (
        result.err
    )


@pytest.mark.parametrize(
    "body,key,message",
    [
        ("        selector_type: difficulty_based\n        feature_keys: [weak]\n", "feature_keys", "reads 2 feature"),
        ("        selector_type: offline_easy2hard\n", "feature_keys", "reads 1 or more feature columns; 0 given"),
        ("        selector_type: shuffle\n        feature_keys: [weak]\n", "feature_keys", "reads no feature columns"),
        (DIFFICULTY + "        kwargs: {temperature: 2}\n", "kwargs.temperature", "unknown key (selector"),
        (DIFFICULTY + "        kwargs: {tau: -1}\n", "kwargs.tau", "(selector 'difficulty_based')"),
        ("        selector_type: random\n        kwargs: {tau: 1}\n", "kwargs.tau", "unknown key (selector 'random')"),
        ("        selector_type: curriculum\n", "selector_type", "input should be 'sequential', 'shuffle'"),
        ("        seed: lucky\n", "seed", "input should be a valid integer"),
    ],
)
def test_a_selectors_bad_settings_are_exit_2_where_written(render, body, key, message):
    result, _ = render(selector(TASKSET, body))
    assert result.code == 2
    line = next(
        line for line in result.err.splitlines() if f"buffer.explorer_input.taskset.data_selector.{key}" in line
    )
    assert line.startswith("error: run.yaml:") and message in line


def test_a_training_tasksets_task_selector_is_its_data_selector_with_a_warning(render):
    result, cfg = render(selector(TASKSET, "        selector_type: shuffle\n        seed: 7\n", "task_selector"))
    assert result.code == 0
    assert "buffer.explorer_input.taskset.task_selector: deprecated upstream: it replaces data_selector" in result.err
    assert cfg["buffer"]["explorer_input"]["taskset"]["data_selector"] == {
        "selector_type": "shuffle",
        "seed": 7,
        "feature_keys": [],
        "kwargs": {},
    }
    both = selector(selector(TASKSET, "        selector_type: shuffle\n", "task_selector"), "        seed: 3\n")
    result, _ = render(both)
    assert result.code == 2
    assert "buffer.explorer_input.taskset.data_selector: buffer.explorer_input.taskset.task_selector (deprecated " in (
        result.err
    )


def test_an_evaluation_tasksets_task_selector_is_noted_as_read_nowhere(render):
    result, cfg = render(EVAL + "        task_selector: {selector_type: shuffle}\n")
    assert result.code == 0
    assert "task_selector: changes nothing: Trinity-RFT reads task_selector (deprecated) for training" in result.err
    assert cfg["buffer"]["explorer_input"]["eval_tasksets"][0]["data_selector"]["selector_type"] == "sequential"


def test_an_rl_experience_buffers_selector_is_noted_and_an_sft_data_sets_is_not(render):
    text = RL + "buffer:\n  trainer_input:\n    experience_buffer:\n      name: e\n"
    result, _ = render(text + "      data_selector: {selector_type: random}\n")
    assert result.code == 0
    assert "experience_buffer.data_selector: changes nothing: the trainer reads experiences in the order" in (
        result.err
    )
    sft, _ = render(SFT + "      data_selector: {selector_type: random}\n")
    assert sft.code == 0 and "data_selector" not in sft.err


def test_the_selector_keys_are_explained_and_diffed(cli, write):
    path = write("run.yaml", MINIMAL + selector(TASKSET, DIFFICULTY))
    explained = cli("config", "render", "-c", path, "--explain", "buffer.explorer_input.taskset.data_selector.kwargs")
    assert explained.code == 0 and "rule data_selectors" in explained.out
    diff = cli("config", "diff", "-c", path, "--vs", "+buffer.explorer_input.taskset.data_selector.seed=3")
    assert diff.code == 1 and "buffer.explorer_input.taskset.data_selector.seed: 42 -> 3" in diff.out
