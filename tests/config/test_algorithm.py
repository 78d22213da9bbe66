"""Algorithm presets fill the loss functions; each function's arguments are checked where they were written."""

import pytest

from tests.conftest import MINIMAL

GRPO = MINIMAL + "algorithm:\n  repeat_times: 4\n"


@pytest.fixture
def render(cli, write):
    def _render(text: str, *args: str):
        result = cli("config", "render", "-c", write("run.yaml", text), "hardware=cpu", "--format", "json", *args)
        return result, (result.json() if result.code == 0 else None)

    return _render


def test_grpo_preset_fills_every_function_and_its_arguments(render):
    result, cfg = render(GRPO)
    algo = cfg["algorithm"]
    assert result.code == 0
    assert (algo["advantage_fn"], algo["policy_loss_fn"], algo["kl_loss_fn"], algo["entropy_loss_fn"]) == ("grpo", "ppo", "k2", "default")
    assert algo["policy_loss_fn_args"] == {"clip_range": 0.2, "clip_range_low": None, "clip_range_high": None}
    assert algo["kl_loss_fn_args"] == {"kl_coef": 0.001} and algo["loss_agg_mode"] == "token-mean"


def test_a_function_you_set_is_kept_and_its_arguments_completed(render):
    result, cfg = render(GRPO + "  kl_loss_fn: low_var_kl\n  policy_loss_fn_args:\n    clip_range_high: 0.28\n")
    assert result.code == 0
    assert cfg["algorithm"]["kl_loss_fn"] == "low_var_kl"
    assert cfg["algorithm"]["policy_loss_fn_args"] == {"clip_range": 0.2, "clip_range_low": None, "clip_range_high": 0.28}


def test_explain_names_the_preset_as_the_source(cli, write):
    result = cli("config", "render", "-c", write("run.yaml", GRPO), "hardware=cpu", "--explain", "algorithm.policy_loss_fn")
    assert result.code == 0 and "rule algorithm_preset" in result.out and "algorithm.algorithm_type='grpo'" in result.out


def test_unknown_algorithm_is_refused_with_a_suggestion(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", GRPO + "  algorithm_type: grpoo\n"), "hardware=cpu")
    assert result.code == 2
    assert "run.yaml:5:3: algorithm.algorithm_type: unknown algorithm 'grpoo'" in result.err
    assert "allowed: grpo, sft, ppo" in result.err and "did you mean 'grpo'?" in result.err


def test_ppo_is_known_but_needs_a_critic(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", GRPO + "  algorithm_type: ppo\n"), "hardware=cpu")
    assert result.code == 2 and "'ppo' cannot run yet: PPO needs a critic model" in result.err


def test_negative_clip_range_is_caught_before_verl_sees_it(cli, write):
    text = GRPO + "  policy_loss_fn_args:\n    clip_range: -0.2\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert "run.yaml:6:5: algorithm.policy_loss_fn_args.clip_range: input should be greater than 0 (got -0.2)" in result.err


def test_misspelled_argument_gets_the_functions_own_names(cli, write):
    text = GRPO + "  kl_loss_fn_args:\n    kl_cof: 0.1\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2 and "algorithm.kl_loss_fn_args.kl_cof: unknown key" in result.err and "did you mean 'kl_coef'?" in result.err


def test_a_string_where_a_number_belongs_is_an_error(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", GRPO), "hardware=cpu", "+algorithm.kl_loss_fn_args.kl_coef=lots")
    assert result.code == 2 and "algorithm.kl_loss_fn_args.kl_coef: input should be a valid number" in result.err


def test_unknown_function_lists_the_known_ones(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", GRPO + "  kl_loss_fn: k4\n"), "hardware=cpu")
    assert result.code == 2 and "unknown kl_loss_fn 'k4'" in result.err and "allowed: none, k1, k2, k3, low_var_kl, abs, mse" in result.err


def test_sft_takes_no_policy_arguments(cli, write):
    text = MINIMAL + "mode: train\nalgorithm:\n  algorithm_type: sft\n  policy_loss_fn_args:\n    clip_range: 0.2\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2 and "policy_loss_fn 'sft' takes no arguments" in result.err


def test_sft_outside_train_mode_is_refused(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", MINIMAL + "algorithm:\n  algorithm_type: sft\n"), "hardware=cpu")
    assert result.code == 2 and "mode: algorithm 'sft' trains on a data set and generates nothing" in result.err


def test_grpo_with_one_rollout_per_task_warns(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", MINIMAL), "hardware=cpu")
    assert result.code == 0 and "warning: " in result.err and "with 1 per task every advantage is 0" in result.err


def test_train_batch_size_is_batch_times_repeats(render):
    result, cfg = render(GRPO + "buffer:\n  batch_size: 12\n")
    assert result.code == 0 and cfg["buffer"]["train_batch_size"] == 48
