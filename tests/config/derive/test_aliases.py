"""Rules of trinity/config/derive/aliases.py, and the other Trinity-RFT spellings of issue 46 that change nothing or
mean one of trinity's values, each through `trinity config render/validate` as a user would run them."""

import pytest

from tests.conftest import MINIMAL, REPO

REFERENCE = str(REPO / "examples" / "grpo_gsm8k" / "gsm8k.yaml")


def test_vllm_async_is_vllm_with_a_note(render):
    result, cfg = render("explorer:\n  rollout_model:\n    engine_type: vllm_async\n", "hardware=a100")
    assert cfg["explorer"]["rollout_model"]["engine_type"] == "vllm"
    assert (
        "note: run.yaml:5:5: explorer.rollout_model.engine_type: 'vllm_async' is Trinity-RFT's former name of its vLLM "
        "engine, which runs every request asynchronously: engine 'vllm'" in result.err
    )
    assert "hint: write explorer.rollout_model.engine_type: vllm" in result.err


def test_vllm_async_is_held_to_what_vllm_is_held_to(render):
    """The alias becomes vllm before the profile's engines are checked: on a profile without vLLM it is refused as
    vllm is."""
    result, _ = render("explorer:\n  rollout_model:\n    engine_type: vllm_async\n    engine_num: 1\n", "hardware=cpu")
    plain, _ = render("explorer:\n  rollout_model:\n    engine_type: vllm\n    engine_num: 1\n", "hardware=cpu")
    assert result.code == plain.code
    misspelt, _ = render("explorer:\n  rollout_model:\n    engine_type: vllm_asink\n", "hardware=a100")
    assert misspelt.code == 2 and "run.yaml:5:5: explorer.rollout_model.engine_type" in misspelt.err
    assert "did you mean 'vllm_async'?" in misspelt.err


def test_zero_devices_per_node_asks_the_profile_and_zero_nodes_is_one(render):
    result, cfg = render("cluster:\n  node_num: 0\n  gpu_per_node: 0\n", "hardware=a100")
    assert (cfg["cluster"]["gpu_per_node"], cfg["cluster"]["node_num"]) == (8, 1)
    assert "note: run.yaml:5:3: cluster.gpu_per_node: 0 asks Ray in Trinity-RFT; here it is unset" in result.err
    assert "note: run.yaml:4:3: cluster.node_num: 0 asks Ray in Trinity-RFT; here it is unset: one node" in result.err
    _, offered = render("cluster:\n  gpu_per_node: 0\n  node_devices: 4\n", "hardware=a100")
    assert offered["cluster"]["gpu_per_node"] == 4  # what a node offers, as when it is unset


def test_zero_devices_per_node_is_left_to_the_live_cluster(write):
    from trinity.config.compose import Request
    from trinity.config.run_target import on_cluster, run_target

    path = write("run.yaml", MINIMAL + "cluster:\n  node_num: 0\n  gpu_per_node: 0\n")
    target = run_target(Request(path, ("hardware=a100",)))
    assert (target.node_num, target.gpu_per_node_written) == (1, False)
    assert on_cluster(Request(path, ("hardware=a100",)), target, [4, 2]).cluster.gpu_per_node == 4
    written = run_target(Request(write("set.yaml", MINIMAL + "cluster:\n  gpu_per_node: 2\n"), ("hardware=a100",)))
    assert written.gpu_per_node_written


@pytest.mark.parametrize(
    "key,text",
    [
        ("explorer.rollout_model.enable_history", "explorer:\n  rollout_model:\n    enable_history: {}\n"),
        ("synchronizer.wait_for_checkpoint", "synchronizer:\n  wait_for_checkpoint: {}\n"),
        ("trainer.grad_offload", "trainer:\n  grad_offload: {}\n"),
        ("trainer.fix_actor_microbatch_loss_scale", "trainer:\n  fix_actor_microbatch_loss_scale: {}\n"),
    ],
)
@pytest.mark.parametrize("value", ["true", "false"])
def test_keys_that_change_nothing_are_accepted_with_a_note(render, key, text, value):
    result, cfg = render(text.format(value))
    assert result.code == 0
    section, name = key.rsplit(".", 1)
    found = cfg
    for part in section.split("."):
        found = found[part]
    assert found[name] is (value == "true")
    assert f"{key}: changes nothing: " in result.err
    unset, _ = render("")
    assert "changes nothing" not in unset.err


@pytest.mark.parametrize(
    "text,key,why",
    [
        ("explorer:\n  runner_num: 4\n", "explorer.runner_num", "runners are explorer.rollout_model.engine_num x "),
        ("explorer:\n  runner_prepare_concurrency: 2\n", "explorer.runner_prepare_concurrency", "threads of the "),
        ("explorer:\n  runner_prepare_max_retries: 0\n", "explorer.runner_prepare_max_retries", "threads of the "),
        ("explorer:\n  rollout_model:\n    use_v1: true\n", "explorer.rollout_model.use_v1", "vLLM 0.11 removed V0"),
    ],
)
def test_trinity_rft_runner_and_engine_switches_are_accepted_with_a_note(render, text, key, why):
    result, cfg = render(text)
    assert result.code == 0 and f"{key}: changes nothing: " in result.err and why in result.err


def test_use_v1_false_is_refused_as_vllms_removed_engine(render):
    result, _ = render("explorer:\n  rollout_model:\n    use_v1: false\n", "hardware=a100")
    assert result.code == 2
    assert (
        "error: run.yaml:5:5: explorer.rollout_model.use_v1: known Trinity-RFT value, not supported by trinity yet: "
        "False" in result.err
    )
    assert "hint: vLLM's V0 engine was removed in vLLM 0.11" in result.err


def test_weight_sync_buffer_size_is_the_sync_bucket_by_trinity_rfts_name(render):
    _, cfg = render("")
    assert cfg["explorer"]["rollout_model"]["weight_sync_buffer_size"] == cfg["synchronizer"]["sync_bucket_mib"] == 256
    result, cfg = render("explorer:\n  rollout_model:\n    weight_sync_buffer_size: 64\n")
    assert result.code == 0 and cfg["synchronizer"]["sync_bucket_mib"] == 64
    assert (
        "note: run.yaml:5:5: explorer.rollout_model.weight_sync_buffer_size: Trinity-RFT's name of "
        "synchronizer.sync_bucket_mib, the largest piece of weights a sync moves: 64 MiB" in result.err
    )
    same, _ = render(
        "explorer:\n  rollout_model:\n    weight_sync_buffer_size: 64\nsynchronizer:\n  sync_bucket_mib: 64\n"
    )
    assert same.code == 0
    both, _ = render(
        "explorer:\n  rollout_model:\n    weight_sync_buffer_size: 64\nsynchronizer:\n  sync_bucket_mib: 32\n"
    )
    assert both.code == 2
    assert (
        "error: run.yaml:5:5: explorer.rollout_model.weight_sync_buffer_size: 64 MiB and "
        "synchronizer.sync_bucket_mib=32 (run.yaml:7:3)" in both.err
    )
    assert "allowed: 32" in both.err


def test_hybrid_engine_true_is_accepted_and_false_refused_with_the_reason(render):
    verl = "trainer:\n  trainer_config:\n    actor_rollout_ref:\n      hybrid_engine: {}\n"
    result, _ = render(verl.format("true"))
    assert result.code == 0 and "hybrid_engine" not in result.err
    result, _ = render(verl.format("false"))
    assert result.code == 2
    assert (
        "error: run.yaml:6:7: trainer.trainer_config.actor_rollout_ref.hybrid_engine: false is not run: verl's actor "
        "and its rollout in one worker is how Trinity-RFT runs verl" in result.err
    )
    assert "allowed: true" in result.err
    result, _ = render(verl.format("1"))
    assert result.code == 2 and "1 is not run" in result.err


SEVEN_B = ("hardware=ascend910b4", "model.model_path=Qwen/Qwen2.5-7B-Instruct")


def test_ignore_validator_suggestions_makes_a_role_that_does_not_fit_a_warning_that_says_so(cli):
    refused = cli("config", "validate", "-c", REFERENCE, *SEVEN_B)
    assert refused.code == 2 and "does not fit on ascend910b4" in refused.err
    told = cli("config", "validate", "-c", REFERENCE, *SEVEN_B, "+ignore_validator_suggestions=true")
    assert told.code == 0
    assert "warning: " in told.err and "does not fit on ascend910b4" in told.err
    assert "a warning, not an error: ignore_validator_suggestions is set" in told.err
    strict = cli("config", "validate", "-c", REFERENCE, *SEVEN_B, "+ignore_validator_suggestions=true", "--strict")
    assert strict.code == 2  # --strict still makes every warning an error
    planned = cli("plan", "memory", "-c", REFERENCE, *SEVEN_B, "+ignore_validator_suggestions=true", "--format", "json")
    assert planned.code == 0 and planned.json()["fits"] is False


@pytest.mark.parametrize(
    "text,where,key",
    [
        ("log:\n  level: VERBOSE\n", "run.yaml:4:3", "log.level"),
        ("explorer:\n  max_repeat_times_per_runner: 0\n", "run.yaml:4:3", "explorer.max_repeat_times_per_runner"),
        ("ignore_validator_suggestions: maybe\n", "run.yaml:3:1", "ignore_validator_suggestions"),
        ("cluster:\n  gpu_per_node: -1\n", "run.yaml:4:3", "cluster.gpu_per_node"),
        ("trainer:\n  enable_preview: 3\n", "run.yaml:4:3", "trainer.enable_preview"),
        ("model:\n  model_path: /m\n  top_k: -2\n", "run.yaml:3:3", "model.top_k"),
        ("model:\n  model_path: /m\n  rope_theta: 0\n", "run.yaml:3:3", "model.rope_theta"),
        ("model:\n  model_path: /m\n  rope_scaling: 2.0\n", "run.yaml:3:3", "model.rope_scaling"),
        ("explorer:\n  rollout_model:\n    ignore_eos: maybe\n", "run.yaml:5:5", "explorer.rollout_model.ignore_eos"),
        (
            "explorer:\n  rollout_model:\n    min_response_tokens: -1\n",
            "run.yaml:5:5",
            "explorer.rollout_model.min_response_tokens",
        ),
        (
            "explorer:\n  rollout_model:\n    max_prompt_tokens: 0\n",
            "run.yaml:5:5",
            "explorer.rollout_model.max_prompt_tokens",
        ),
        (
            "explorer:\n  rollout_model:\n    weight_sync_buffer_size: 0\n",
            "run.yaml:5:5",
            "explorer.rollout_model.weight_sync_buffer_size",
        ),
        ("explorer:\n  runner_num: many\n", "run.yaml:4:3", "explorer.runner_num"),
        ("trainer:\n  save_strategy: fastest\n", "run.yaml:4:3", "trainer.save_strategy"),
        ("monitor:\n  detailed_stats: 2\n", "run.yaml:4:3", "monitor.detailed_stats"),
        ("synchronizer:\n  group_name: ''\n", "run.yaml:4:3", "synchronizer.group_name"),
    ],
)
def test_a_bad_value_of_a_new_key_is_refused_where_it_is_written(render, text, where, key):
    result, _ = render(text)
    assert result.code == 2 and f"error: {where}: {key}: " in result.err
