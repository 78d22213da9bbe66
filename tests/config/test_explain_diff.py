"""`render --explain` and `config diff` through the CLI."""

from tests.conftest import MINIMAL, REFERENCE


def test_explain_shows_every_layer_lowest_first(cli):
    result = cli("config", "render", "-c", REFERENCE, "--explain", "synchronizer.sync_method", "hardware=ascend910b")
    lines = result.out.splitlines()
    assert lines[0] == "synchronizer.sync_method = 'hccl'"
    assert lines[1].split()[:3] == ["schema", "schema", "default"] and lines[1].endswith("'online'  (overridden)")
    assert "file" in lines[2] and "gsm8k.yaml:62:3" in lines[2] and lines[2].endswith("'nccl'  (overridden)")
    assert "rule sync_method" in lines[3] and "<- synchronizer.sync_method='nccl'" in lines[3]
    assert "ascend910b.collective_backend='hccl' (" in lines[3] and "profiles/ascend910b.yaml:12:3)" in lines[3]


def test_explain_every_layer_kind(cli, write):
    path = write("run.yaml", MINIMAL + "explorer:\n  rollout_model:\n    gpu_memory_utilization: 0.7\n")
    args = (
        "config",
        "render",
        "-c",
        path,
        "hardware=ascend910b",
        "explorer.rollout_model.gpu_memory_utilization=0.6",
        "--format",
        "json",
    )
    chain = cli(*args, "--explain", "explorer.rollout_model.gpu_memory_utilization").json()["explain"][0]["chain"]
    assert [step["layer"] for step in chain] == ["schema", "profile", "file", "override"]
    assert chain[1]["source"].endswith("profiles/ascend910b.yaml:33:7") and chain[2]["source"] == "run.yaml:5:5"
    assert chain[3]["source"] == "override 'explorer.rollout_model.gpu_memory_utilization=0.6'"
    assert [step["overridden"] for step in chain] == [True, True, True, False]


def test_explain_a_section_and_the_conf_layer(cli):
    found = cli(
        "config", "render", "-c", REFERENCE, "--explain", "checkpoint_root_dir", "cluster", "--format", "json"
    ).json()["explain"]
    assert found[0]["chain"][1]["layer"] == "conf" and found[0]["chain"][1]["source"].endswith("conf/config.yaml:4:1")
    assert found[0]["chain"][2]["value"] == "${oc.env:TRINITY_CHECKPOINT_ROOT_DIR,./checkpoints}"
    assert {e["key"] for e in found[1:]} >= {"cluster.trainer_gpu_num", "cluster.gpu_per_node"}


def test_explain_everything_and_unknown_keys(cli):
    everything = cli("config", "render", "-c", REFERENCE, "--explain", "--format", "json").json()["explain"]
    assert len(everything) > 100 and all(e["chain"] for e in everything)
    result = cli("config", "render", "-c", REFERENCE, "--explain", "trainer.sav_interval")
    assert result.code == 2 and "trainer.sav_interval: no such key in the resolved config" in result.err
    assert "did you mean 'trainer.save_interval'?" in result.err


def test_diff_two_profiles(cli):
    result = cli("config", "diff", "-c", REFERENCE, "hardware=a100", "--vs", "hardware=ascend910b")
    assert result.code == 1
    assert (
        "~ synchronizer.sync_method: 'nccl' -> 'hccl'" in result.out
        and "~ trainer.device: 'cuda' -> 'npu'" in result.out
    )
    assert (
        "- env.rollout.NCCL_CUMEM_ENABLE: '0'" in result.out
        and "+ env.rollout.VLLM_ASCEND_ENABLE_NZ: '0'" in result.out
    )
    report = cli(
        "config", "diff", "-c", REFERENCE, "hardware=a100", "--vs", "hardware=ascend910b", "--format", "json"
    ).json()
    assert report["same"] is False and {"key": "trainer.device", "left": "cuda", "right": "npu"} in report["changes"]


def test_diff_of_identical_configs_exits_0(cli):
    result = cli("config", "diff", "-c", REFERENCE, "hardware=h100", "--vs", "hardware=h100")
    assert result.code == 0 and result.out.count("\n") == 2


def test_diff_two_files(cli, write):
    other = write("other.yaml", REFERENCE.read_text().replace("engine_num: 4", "engine_num: 2"))
    result = cli("config", "diff", "-c", REFERENCE, "hardware=a100", "--vs-config", other, "--format", "json")
    changes = {c["key"]: (c["left"], c["right"]) for c in result.json()["changes"]}
    assert changes["explorer.rollout_model.engine_num"] == (4, 2) and changes["cluster.trainer_gpu_num"] == (2, 4)


def test_diff_against_a_saved_render(cli, tmp_path):
    saved = tmp_path / "resolved.json"
    cli("config", "render", "-c", REFERENCE, "hardware=a100", "--format", "json", "-o", saved)
    assert cli("config", "diff", "-c", REFERENCE, "hardware=a100", "--saved", saved).code == 0
    result = cli("config", "diff", "-c", REFERENCE, "hardware=a100", "trainer.save_interval=10", "--saved", saved)
    assert result.code == 1 and "~ trainer.save_interval: 100 -> 10" in result.out


PLANTED = (
    MINIMAL + "env:\n  common:\n    HF_TOKEN: hf_PLANTED\nexplorer:\n  env_vars:\n    WANDB_API_KEY: "
    "PLANTED_WANDB\nmonitor:\n  monitor_args:\n    api_key: PLANTED_KEY\n"
)
SITE_PROFILE = "extends: cpu\ndescription: with a token\nenv:\n  common:\n    HF_TOKEN: hf_PLANTED_IN_PROFILE\n"


def planted_commands(path):
    """(arguments, exit code, text the output must hold) for every command that prints a config, a plan or a profile."""
    commands = []
    for fmt in ("yaml", "json"):
        commands.append((("config", "render", "-c", path, "--format", fmt), 0, "***"))
        commands.append((("config", "render", "-c", path, "--explain", "--format", fmt), 0, "***"))
    commands.append((("config", "render", "-c", path, "--explain", "env", "monitor"), 0, "env.common.HF_TOKEN = '***'"))
    for fmt in ("text", "json"):
        commands.append(
            (
                ("config", "diff", "-c", path, "--vs", "env.common.HF_TOKEN=hf_OTHER_PLANTED", "--format", fmt),
                0,
                "HF_TOKEN=***",
            )
        )
        commands.append((("config", "validate", "-c", path, "--format", fmt), 0, "cpu"))
        commands.append((("run", "-c", path, "--dry-run", "--format", fmt), 0, "HF_TOKEN"))
        commands.append((("profile", "show", "site", "--profile-dir", "site", "--format", fmt), 0, "***"))
    return commands


def test_planted_secret_never_appears(cli, write):
    path = write("run.yaml", PLANTED)
    write("site/site.yaml", SITE_PROFILE)
    for args, code, promised in planted_commands(path):
        result = cli(*args)
        assert result.code == code, (args, result.err)
        assert promised in result.out + result.err, (args, result.out)
        assert "PLANTED" not in result.out + result.err, (args, result.out + result.err)


def test_secrets_are_shown_when_asked(cli, write):
    path = write("run.yaml", PLANTED)
    write("site/site.yaml", SITE_PROFILE)
    shown = cli("config", "render", "-c", path, "--explain", "env.common.HF_TOKEN", "--show-secrets")
    assert shown.code == 0 and "hf_PLANTED" in shown.out
    rendered = cli("config", "render", "-c", path, "--format", "json", "--show-secrets")
    assert rendered.code == 0 and rendered.json()["env"]["common"]["HF_TOKEN"] == "hf_PLANTED"
    plan = cli("run", "-c", path, "--dry-run", "--format", "json", "--show-secrets")
    assert plan.code == 0 and {a["env"]["WANDB_API_KEY"] for a in plan.json()["actors"] if a["role"] == "rollout"} == {
        "PLANTED_WANDB"
    }
    text = cli("run", "-c", path, "--dry-run", "--show-secrets")
    assert text.code == 0 and "HF_TOKEN=hf_PLANTED" in text.out and "WANDB_API_KEY=PLANTED_WANDB" in text.out
    profile = cli("profile", "show", "site", "--profile-dir", "site", "--show-secrets")
    assert profile.code == 0 and 'env.common.HF_TOKEN: "hf_PLANTED_IN_PROFILE"' in profile.out


def test_a_credential_of_the_wrong_type_is_not_echoed(cli, write):
    path = write("run.yaml", MINIMAL + "env:\n  common:\n    HF_TOKEN: 1234567890\n")
    result = cli("config", "validate", "-c", path)
    assert result.code == 2
    assert (
        "error: run.yaml:5:5: env.common.HF_TOKEN: input should be a valid string (got '***')" in result.err
        and "hint: quote it: '***'" in result.err
    )
    assert "1234567890" not in result.err


ISSUE_46 = (
    "explorer.max_repeat_times_per_runner=1",
    "~buffer.trainer_input.experience_buffer.path",  # the replay buffer is the in-memory queue's
    "+buffer.trainer_input.experience_buffer.max_read_timeout=7200",
    "+buffer.trainer_input.experience_buffer.replay_buffer.enable=true",
    "trainer.enable_preview=true",
    "log.level=DEBUG",
    "explorer.rollout_model.engine_type=vllm_async",
    "+data_processor.experience_pipeline.operators=[{name: dapo_dynamic_sampling}]",
)


def test_the_keys_of_trinity_rfts_examples_are_explained_and_diffed(cli):
    keys = (
        "explorer.max_repeat_times_per_runner",
        "buffer.trainer_input.experience_buffer.replay_buffer.enable",
        "trainer.enable_preview",
        "log.level",
        "explorer.rollout_model.engine_type",
        "data_processor.experience_pipeline.operators",
    )
    explained = cli("config", "render", "-c", REFERENCE, "hardware=a100", *ISSUE_46, "--explain", *keys)
    assert explained.code == 0
    for key in keys:
        assert f"{key}" in explained.out
    assert "rule engine_alias" in explained.out  # vllm_async -> vllm, the rule named
    diff = cli(
        "config", "diff", "-c", REFERENCE, "hardware=a100", "--vs", "hardware=a100", *ISSUE_46, "--format", "json"
    )
    changed = {d["key"] for d in diff.json()["changes"]}
    assert (
        diff.code == 1
        and {
            "explorer.max_repeat_times_per_runner",
            "buffer.trainer_input.experience_buffer.max_read_timeout",
            "trainer.enable_preview",
            "log.level",
        }
        <= changed
    )


# issue 46, part C: the data selectors, retries and format keys of every data set
TASKSET_KEYS = "buffer.explorer_input.taskset"
PART_C = {
    f"{TASKSET_KEYS}.data_selector.selector_type": "shuffle",
    f"{TASKSET_KEYS}.data_selector.seed": "7",
    f"{TASKSET_KEYS}.max_retry_times": "5",
    f"{TASKSET_KEYS}.format.enable_thinking": "true",
    f"{TASKSET_KEYS}.format.reward_fn_key": "scorer",
    "buffer.trainer_input.experience_buffer.max_retry_interval": "2",
    "buffer.trainer_input.experience_buffer.format.enable_thinking": "false",
}


def test_the_data_sets_selectors_retries_and_format_keys_are_explained_and_diffed(cli):
    overrides = [f"+{key}={value}" for key, value in PART_C.items()]
    explained = cli("config", "render", "-c", REFERENCE, "hardware=a100", *overrides, "--explain", *PART_C)
    assert explained.code == 0
    for key, value in PART_C.items():
        assert f"{key} = " in explained.out and f"override '+{key}={value}'" in explained.out
    diff = cli("config", "diff", "-c", REFERENCE, "hardware=a100", "--vs", *overrides, "--format", "json")
    assert diff.code == 1 and set(PART_C) <= {d["key"] for d in diff.json()["changes"]}


MODEL_KEYS_46 = (
    "+model.rope_theta=1e6",
    "model.top_k=20",
    "+explorer.rollout_model.ignore_eos=true",
    "+explorer.rollout_model.max_prompt_tokens=512",
    "+explorer.rollout_model.weight_sync_buffer_size=64",
    "+monitor.detailed_stats=true",
    "+synchronizer.group_name=grpo_sync",
    "+trainer.grad_offload=true",
    "+explorer.runner_num=2",
)


def test_the_model_keys_of_trinity_rft_are_explained_and_diffed(cli):
    """Issue 46's model and rollout-model keys: each explained with the layer that set it or the rule that derived
    it, each in `config diff`."""
    keys = (
        "model.rope_theta",
        "explorer.rollout_model.max_prompt_tokens",
        "explorer.rollout_model.max_response_tokens",
        "synchronizer.sync_bucket_mib",
        "explorer.rollout_model.weight_sync_buffer_size",
        "monitor.detailed_stats",
        "synchronizer.group_name",
    )
    explained = cli("config", "render", "-c", REFERENCE, "hardware=a100", *MODEL_KEYS_46, "--explain", *keys)
    assert explained.code == 0
    for key in keys:
        assert f"{key} = " in explained.out
    assert "rule rollout_model" in explained.out and "rule sync_bucket" in explained.out
    diff = cli(
        "config", "diff", "-c", REFERENCE, "hardware=a100", "--vs", "hardware=a100", *MODEL_KEYS_46, "--format", "json"
    )
    changed = {d["key"] for d in diff.json()["changes"]}
    assert (
        diff.code == 1
        and {
            "model.rope_theta",
            "model.top_k",
            "explorer.rollout_model.ignore_eos",
            "explorer.rollout_model.max_prompt_tokens",
            "synchronizer.sync_bucket_mib",
            "explorer.rollout_model.weight_sync_buffer_size",
            "monitor.detailed_stats",
            "synchronizer.group_name",
            "trainer.grad_offload",
            "explorer.runner_num",
        }
        <= changed
    )


def test_balance_batch_and_bench_on_latest_checkpoint_are_explained_and_diffed(cli):
    """trainer.balance_batch and explorer.bench_on_latest_checkpoint (issue 46): explained with the layer that set
    them, and in `config diff`."""
    keys = ("trainer.balance_batch", "explorer.bench_on_latest_checkpoint")
    explained = cli("config", "render", "-c", REFERENCE, "hardware=a100", "--explain", *keys)
    assert explained.code == 0
    assert "trainer.balance_batch = True" in explained.out
    assert "explorer.bench_on_latest_checkpoint = False" in explained.out
    set_both = ("+trainer.balance_batch=false", "+explorer.bench_on_latest_checkpoint=true", "mode=bench")
    diff = cli("config", "diff", "-c", REFERENCE, "hardware=a100", "--vs", "hardware=a100", *set_both)
    assert diff.code == 1
    assert "~ trainer.balance_batch: True -> False" in diff.out
    assert "~ explorer.bench_on_latest_checkpoint: False -> True" in diff.out
