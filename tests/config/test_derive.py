"""Derivation rules, each through `trinity config render/validate`."""

import re

import pytest

from tests.conftest import MINIMAL, REPO


@pytest.fixture
def render(cli, write):
    """Render a run config given as YAML text on a profile with overrides; returns (Result, dict or None)."""

    def _render(text: str, *args: str):
        path = write("run.yaml", text if text.startswith("model:") else MINIMAL + text)
        result = cli("config", "render", "-c", path, "--format", "json", *args)
        return result, (result.json() if result.code == 0 else None)

    return _render


# --- sync method -----------------------------------------------------------------------


@pytest.mark.parametrize("profile,backend", [("ascend910b", "hccl"), ("a100", "nccl"), ("cpu", "gloo")])
def test_online_becomes_the_hardware_collective(render, profile, backend):
    result, cfg = render("algorithm:\n  repeat_times: 4\nsynchronizer:\n  sync_method: online\n", f"hardware={profile}")
    assert cfg["synchronizer"]["sync_method"] == backend and result.err == ""


def test_online_is_the_default(render):
    assert render("", "hardware=ascend910c")[1]["synchronizer"]["sync_method"] == "hccl"


def test_other_vendor_collective_is_corrected_with_a_warning(render):
    result, cfg = render("synchronizer:\n  sync_method: hccl\n", "hardware=a100")
    assert cfg["synchronizer"]["sync_method"] == "nccl"
    assert (
        "warning: run.yaml:4:3: synchronizer.sync_method: 'hccl' is not the collective backend of a100, which is 'nccl'"
        in result.err
    )
    assert "write sync_method: online" in result.err


def test_other_vendor_collective_is_an_error_under_strict(cli, write):
    path = write("run.yaml", MINIMAL + "synchronizer:\n  sync_method: nccl\n")
    result = cli("config", "validate", "-c", path, "hardware=ascend910b", "--strict")
    assert result.code == 2
    assert (
        "error: run.yaml:4:3: synchronizer.sync_method: 'nccl' is not the collective backend of ascend910b"
        in result.err
    )
    assert "(an error under --strict)" in result.err


def test_offline_is_checkpoint(render):
    cfg = render("synchronizer:\n  sync_method: offline\n", "hardware=a100")[1]
    assert cfg["synchronizer"]["sync_method"] == "checkpoint" and cfg["synchronizer"]["weight_sync_world_size"] is None


@pytest.mark.parametrize("mode,method", [("train", "checkpoint"), ("explore", "checkpoint"), ("colocate", "memory")])
def test_collective_outside_both_mode_is_replaced_with_a_note(render, mode, method):
    result, cfg = render(f"mode: {mode}\nsynchronizer:\n  sync_method: online\n", "hardware=a100")
    assert cfg["synchronizer"]["sync_method"] == method
    assert (
        "note: run.yaml:5:3: synchronizer.sync_method: a collective sync needs explorer and trainer running side by "
        f"side; in mode '{mode}' it becomes '{method}'" in result.err
    )


def test_memory_in_a_run_without_both_trainer_and_engines_goes_through_checkpoint_files(render):
    """A train run and an explore run of one directory meet through files: memory sync needs both in one run."""
    result, cfg = render("mode: train\nsynchronizer:\n  sync_method: memory\n", "hardware=a100")
    assert (cfg["synchronizer"]["sync_method"], cfg["synchronizer"]["sync_channel"]) == ("checkpoint", "files")
    assert (
        "note: run.yaml:5:3: synchronizer.sync_method: a memory sync needs trainer and engines in one run; in mode "
        "'train' it becomes 'checkpoint'" in result.err
    )


@pytest.mark.parametrize(
    "profile,mode,method,channel",
    [
        ("a100", "both", "online", "process_group"),
        ("a100", "colocate", "online", "device_ipc"),  # CUDA IPC: the engines map the trainer's device buffers
        ("ascend910b", "colocate", "online", "device_ipc"),  # torch_npu's NPU IPC
        ("cpu", "colocate", "online", "object_store"),  # no device memory to map
        ("a100", "both", "memory", "object_store"),  # engines on devices of their own: through host memory
        ("a100", "both", "checkpoint", "files"),
        ("a100", "explore", "online", "files"),
    ],
)
def test_the_channel_follows_the_method_the_mode_and_whether_the_platform_maps_device_memory(
    render, profile, mode, method, channel
):
    cfg = render(f"mode: {mode}\nsynchronizer:\n  sync_method: {method}\n", f"hardware={profile}")[1]
    assert cfg["synchronizer"]["sync_channel"] == channel


def test_the_channel_is_explained_and_refused_when_set_by_hand(cli, render, write):
    path = write("run.yaml", MINIMAL + "mode: colocate\n")
    explained = cli("config", "render", "-c", path, "hardware=h200", "--explain", "synchronizer.sync_channel").out
    assert "rule sync_channel" in explained and "'device_ipc'  <- synchronizer.sync_method='memory'" in explained
    assert "platform cuda.device_ipc=True (CUDA IPC handles" in explained
    result, _ = render("synchronizer:\n  sync_channel: files\n", "hardware=a100")
    assert result.code == 2
    assert (
        "error: run.yaml:4:3: synchronizer.sync_channel: is derived ('process_group': from sync_method, mode and the "
        "platform) and must not be set to 'files'" in result.err
    )


SHAPED = (
    "algorithm:\n  repeat_times: 4\nbuffer:\n  explorer_input:\n    default_workflow_type: math_workflow\n"
    "    taskset:\n      path: /data/t\n      rollout_args:\n        temperature: 0.7\n"
)


def test_the_trainer_recomputes_old_logprobs_where_the_engine_returns_raw_ones_and_sampling_shapes_them(render):
    """vllm-ascend builds its sampler without vLLM's logprobs_mode: on Ascend vLLM's log-probs are the logits' own,
    not those of a distribution at temperature 0.7, so the engines' cannot stand for the old policy's."""
    result, cfg = render(SHAPED, "hardware=ascend910b")
    assert cfg["algorithm"]["bypass_old_logprobs"] is False
    assert "note: schema default: algorithm.bypass_old_logprobs: 'vllm' returns the logits' own log-probs" in result.err
    assert (
        "profiles/ascend910b.yaml:24:3), and buffer.explorer_input.taskset.rollout_args sample from another "
        "distribution: the trainer recomputes the old log-probs" in result.err
    )
    assert render(SHAPED, "hardware=a100")[1]["algorithm"]["bypass_old_logprobs"] is True  # vLLM's processed ones
    at_one = render(SHAPED.replace("0.7", "1.0"), "hardware=ascend910b")[1]  # the logits' own distribution
    transformers = render(SHAPED, "hardware=ascend910b", "explorer.rollout_model.engine_type=transformers")[1]
    assert at_one["algorithm"]["bypass_old_logprobs"] is True and transformers["algorithm"]["bypass_old_logprobs"]
    result, cfg = render(SHAPED, "hardware=ascend910b", "algorithm.bypass_old_logprobs=true")
    assert cfg["algorithm"]["bypass_old_logprobs"] is True  # yours stands, warned about
    assert "the update would take wrong old log-probs" in result.err


def test_weight_sync_world_size_is_rollout_plus_one(render):
    cfg = render("explorer:\n  rollout_model:\n    engine_num: 3\n    tensor_parallel_size: 2\n", "hardware=h100")[1]
    assert cfg["cluster"]["rollout_gpu_num"] == 6 and cfg["synchronizer"]["weight_sync_world_size"] == 7


# --- trainer device, backend, torch.compile, strategy, dtype ----------------------------


def test_trainer_device_follows_the_profile_and_a_contradiction_warns(render):
    result, cfg = render("trainer:\n  device: cuda\n", "hardware=ascend910b")
    assert cfg["trainer"]["device"] == "npu"
    assert "warning: run.yaml:4:3: trainer.device: 'cuda' contradicts hardware fact device_type='npu'" in result.err


def test_torch_compile_defaults_to_the_hardware(render):
    assert render("", "hardware=a100")[1]["trainer"]["use_torch_compile"] is True
    assert render("", "hardware=ascend910b")[1]["trainer"]["use_torch_compile"] is False


def test_torch_compile_on_npu_is_an_error_that_says_why(render):
    result, _ = render("trainer:\n  use_torch_compile: true\n", "hardware=ascend910b")
    assert result.code == 2
    assert (
        "error: run.yaml:4:3: trainer.use_torch_compile: torch.compile cannot be used for training on ascend910b: "
        "inductor has no NPU backend" in result.err
    )
    assert "allowed: false" in result.err and "hint: set trainer.use_torch_compile: false" in result.err


def test_megatron_on_npu_is_reported_at_validate_time(render):
    result, _ = render("trainer:\n  trainer_strategy: megatron\n", "hardware=ascend910c")
    assert result.code == 2
    assert (
        "run.yaml:4:3: trainer.trainer_strategy: 'megatron' does not run on ascend910c: Megatron training on Ascend "
        "NPUs is not supported yet" in result.err
    )
    assert "is not run by this version of trinity" not in result.err  # one error per key: the hardware's reason


def test_megatron_is_refused_on_gpus_too_because_nothing_runs_it(render):
    result, _ = render("trainer:\n  trainer_strategy: megatron\n", "hardware=a100")
    assert result.code == 2 and result.err.startswith("trinity: 1 problem in the config\n")
    assert (
        "run.yaml:4:3: trainer.trainer_strategy: 'megatron' is not run by this version of trinity: verl's Megatron "
        "backend is not wired in this version of trinity" in result.err
    )
    assert "allowed: fsdp, fsdp2\n    hint: set trainer.trainer_strategy=fsdp, or remove it" in result.err


def test_dtype_the_chip_cannot_compute_in(render, write, tmp_path):
    write("profiles/ascend910a.yaml", "extends: ascend910b\nfacts:\n  chip: Ascend910A\n  dtypes: [float16, float32]\n")
    result, _ = render("", "hardware=ascend910a", "--profile-dir", tmp_path / "profiles")
    assert result.code == 2
    assert "explorer.rollout_model.dtype: bfloat16 is not supported by Ascend910A (ascend910a)" in result.err
    assert "allowed: float16, float32" in result.err


# --- cluster counts ---------------------------------------------------------------------


def test_gpu_per_node_is_what_a_node_offers_where_fewer_and_one_set_above_it_is_lowered_and_said(render):
    """cluster.node_devices (the live cluster's nodes, or this machine with hardware=auto) is a fact: unset,
    gpu_per_node takes the fewer of it and the profile's devices_per_node; set above it, it is lowered with a warning
    naming both places (an error under --strict)."""
    result, cfg = render("cluster:\n  node_devices: 4\n", "hardware=a100")
    assert cfg["cluster"]["gpu_per_node"] == 4 and result.err == ""
    result, cfg = render("cluster:\n  node_devices: 16\n", "hardware=a100")
    assert cfg["cluster"]["gpu_per_node"] == 8  # the profile's node
    result, cfg = render("cluster:\n  gpu_per_node: 6\n  node_devices: 4\n", "hardware=a100")
    assert cfg["cluster"]["gpu_per_node"] == 4
    assert (
        "warning: run.yaml:4:3: cluster.gpu_per_node: 6 devices per node, but a node offers 4 (run.yaml:5:3); using 4"
        in result.err
    )
    assert "hint: set cluster.gpu_per_node=4, or run where nodes have 6 devices" in result.err
    result, _ = render("cluster:\n  gpu_per_node: 6\n  node_devices: 4\n", "hardware=a100", "--strict")
    assert result.code == 2 and "cluster.gpu_per_node: 6 devices per node, but a node offers 4" in result.err


def test_gpu_per_node_defaults_to_the_profile(render):
    cluster = render("", "hardware=ascend910c")[1]["cluster"]
    assert cluster["gpu_per_node"] == 16 and cluster["total_gpu_num"] == 16
    assert cluster["rollout_gpu_num"] == 1 and cluster["trainer_gpu_num"] == 15


def test_gpu_per_node_may_not_exceed_the_node(render):
    result, _ = render("cluster:\n  gpu_per_node: 16\n", "hardware=a100")
    assert result.code == 2
    assert re.search(
        r"error: run.yaml:4:3: cluster.gpu_per_node: 16 devices per node, but one a100 node has 8 "
        r"\(\S*profiles/a100.yaml:\d+:\d+\)",
        result.err,
    )
    assert "allowed: 1..8" in result.err


def test_trainer_gets_whole_nodes(render):
    cluster = render(
        "cluster:\n  node_num: 3\nexplorer:\n  rollout_model:\n    engine_num: 2\n    tensor_parallel_size: 4\n",
        "hardware=a100",
    )[1]["cluster"]
    assert (cluster["total_gpu_num"], cluster["rollout_gpu_num"], cluster["trainer_gpu_num"]) == (24, 8, 16)
    assert (cluster["trainer_node_num"], cluster["trainer_gpu_num_per_node"]) == (2, 8)


def test_engine_larger_than_a_node_spans_whole_nodes(render):
    cfg = render(
        "cluster:\n  node_num: 3\nexplorer:\n  rollout_model:\n    tensor_parallel_size: 16\n", "hardware=ascend910b"
    )[1]
    assert cfg["cluster"]["rollout_gpu_num"] == 16 and cfg["cluster"]["trainer_gpu_num"] == 8


def test_engine_that_does_not_fill_whole_nodes_is_an_error(render):
    result, _ = render(
        "cluster:\n  node_num: 2\nexplorer:\n  rollout_model:\n    tensor_parallel_size: 12\n", "hardware=ascend910b"
    )
    assert result.code == 2
    assert (
        "explorer.rollout_model.tensor_parallel_size: one engine needs 12 devices (TP x PP x DP); an engine larger "
        "than a node must span whole nodes of 8" in result.err
    )


def test_trainer_left_with_nothing_is_an_error_where_a_person_set_the_mode(render):
    yaml = "mode: both\ncluster:\n  gpu_per_node: 4\nexplorer:\n  rollout_model:\n    engine_num: 4\n"
    result, _ = render(yaml, "hardware=a100")
    assert result.code == 2
    assert (
        "run.yaml:8:5: explorer.rollout_model.engine_num: no devices left for the trainer: 4 devices (1 node(s) x 4) "
        "minus 4 for rollout" in result.err
    )
    assert "or set mode=colocate (trainer and engines take turns on the devices)" in result.err


def test_a_mode_nobody_set_takes_turns_on_a_single_device(render):
    """One device can only be shared: the schema's `both` becomes `colocate`, and --explain says why. On more devices
    `both` stays, and leaving the trainer nothing is refused with the settings that work (a person chooses the mode)."""
    result, cfg = render(
        "cluster:\n  gpu_per_node: 1\nexplorer:\n  rollout_model:\n    engine_num: 1\n", "hardware=a100"
    )
    assert result.code == 0, result.err
    assert cfg["mode"] == "colocate" and (cfg["cluster"]["trainer_gpu_num"], cfg["cluster"]["rollout_gpu_num"]) == (
        1,
        1,
    )
    assert (cfg["synchronizer"]["sync_method"], cfg["synchronizer"]["sync_channel"]) == ("memory", "device_ipc")
    assert (
        "note: schema default: mode: the run has one device, which an engine and a trainer rank can only share: mode "
        "'colocate', the trainer and the engines taking turns on it" in result.err
    )
    result, _ = render("cluster:\n  gpu_per_node: 4\nexplorer:\n  rollout_model:\n    engine_num: 4\n", "hardware=a100")
    assert result.code == 2 and "minus 4 for rollout" in result.err and "or set mode=colocate" in result.err
    result, cfg = render(
        "cluster:\n  gpu_per_node: 2\nexplorer:\n  rollout_model:\n    engine_num: 1\n", "hardware=a100"
    )
    assert cfg["mode"] == "both" and cfg["cluster"]["trainer_gpu_num"] == 1  # a device each: side by side
    result, _ = render("mode: both\ncluster:\n  gpu_per_node: 1\n", "hardware=a100")
    assert result.code == 2 and "or set mode=colocate" in result.err  # written: never changed


def test_trainer_share_that_neither_fits_a_node_nor_fills_nodes(render):
    result, _ = render("cluster:\n  node_num: 2\nexplorer:\n  rollout_model:\n    engine_num: 4\n", "hardware=a100")
    assert result.code == 2
    assert (
        "the trainer would get 12 devices (16 - 4 for rollout): that neither fits one node of 8 nor fills whole nodes"
        in result.err
    )


def test_auxiliary_models_are_refused_and_take_no_devices(cli, write):
    text = MINIMAL + "explorer:\n  auxiliary_models:\n    - engine_num: 1\n      tensor_parallel_size: 2\n"
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=a100")
    assert result.code == 2 and result.err.startswith("trinity: 1 problem in the config\n")
    assert (
        "error: run.yaml:4:3: explorer.auxiliary_models: auxiliary models (judges, reward models) are not run by "
        "this version of trinity: no workflow calls them" in result.err
    )
    assert "allowed: [] (none)\n    hint: remove explorer.auxiliary_models" in result.err
    assert (
        cli(
            "config",
            "validate",
            "-c",
            write("run.yaml", MINIMAL + "explorer:\n  auxiliary_models: []\n"),
            "hardware=a100",
        ).code
        == 0
    )


def test_train_mode_gives_every_device_to_the_trainer(render):
    cluster = render("mode: train\ncluster:\n  node_num: 2\n", "hardware=a100")[1]["cluster"]
    assert (cluster["rollout_gpu_num"], cluster["trainer_gpu_num"], cluster["trainer_node_num"]) == (0, 16, 2)


STAGED = "stages:\n  - {stage_name: sft, mode: train}\n  - {stage_name: rl}\n"


@pytest.mark.parametrize(
    "profile,extra,trainer",
    [
        ("cpu", ("cluster.gpu_per_node=2",), 1),  # the profile's fact: the trainer's share of the RL stage
        ("a100", (), 8),  # Trinity-RFT's: every device
        ("cpu", ("cluster.gpu_per_node=2", "cluster.train_stage_devices=all"), 2),
        ("a100", ("cluster.train_stage_devices=trainer", "explorer.rollout_model.engine_num=3"), 5),
        ("cpu", ("cluster.gpu_per_node=2", "+stages.1.mode=train"), 2),  # no stage explores: nothing to share with
        # a single device: the RL stage, whose mode nobody wrote, takes turns on it (colocate), which gives its trainer
        # that device
        ("cpu", ("cluster.gpu_per_node=1",), 1),
    ],
)
def test_a_train_only_stage_trains_on_the_devices_its_run_gives_the_trainer(cli, write, profile, extra, trainer):
    path = write("run.yaml", MINIMAL + STAGED)
    result = cli("config", "render", "-c", path, f"hardware={profile}", "--stage", "sft", "--format", "json", *extra)
    assert result.code == 0, result.err
    cluster = result.json()["cluster"]
    assert (cluster["trainer_gpu_num"], cluster["rollout_gpu_num"]) == (trainer, 0)


def test_a_train_run_of_one_stage_keeps_every_device_whatever_the_setting(render):
    cluster = render("mode: train\n", "hardware=a100", "cluster.train_stage_devices=trainer")[1]["cluster"]
    assert cluster["trainer_gpu_num"] == 8


def test_the_train_stage_split_is_explained_with_the_profile_fact_and_the_runs_stages(cli, write):
    path = write("run.yaml", MINIMAL + STAGED)
    explain = ("--explain", "cluster.trainer_gpu_num", "cluster.gpu_per_node=2")
    result = cli("config", "render", "-c", path, "hardware=cpu", "--stage", "sft", *explain)
    assert result.code == 0, result.err
    last = result.out.strip().splitlines()[-1]
    assert "rule cluster_counts" in last and last.split()[3] == "1", result.out
    assert "cpu.train_stage_devices='trainer' (" in last and "the run's stages: train, both" in last
    # the root config (no stage named) is explained as before: mode both, no stage split
    root = cli("config", "render", "-c", path, "hardware=cpu", *explain)
    assert root.code == 0 and "train_stage_devices" not in root.out


def test_explore_mode_needs_rollout_to_fit(render):
    cluster = render("mode: explore\nexplorer:\n  rollout_model:\n    engine_num: 8\n", "hardware=a100")[1]["cluster"]
    assert (cluster["rollout_gpu_num"], cluster["trainer_gpu_num"]) == (8, 0)
    result, _ = render("mode: explore\nexplorer:\n  rollout_model:\n    engine_num: 9\n", "hardware=a100")
    assert (
        result.code == 2
        and "error: run.yaml:6:5: explorer.rollout_model.engine_num: rollout needs 9 devices but the cluster has 8"
        in result.err
    )


def test_derived_counts_may_not_be_contradicted(render):
    result, _ = render("cluster:\n  trainer_gpu_num: 3\n", "hardware=a100")
    assert (
        result.code == 2
        and "run.yaml:4:3: cluster.trainer_gpu_num: is derived (7) and must not be set to 3" in result.err
    )


def test_npu_only_cluster_math_never_divides_by_zero(render):
    for profile in ("ascend910b", "ascend910c"):
        assert render("mode: train\n", f"hardware={profile}")[0].code == 0


# --- model budget -----------------------------------------------------------------------


def test_prompt_budget_and_rollout_model_are_filled(render):
    cfg = render("model:\n  model_path: /m\n  max_model_len: 4096\n  max_response_tokens: 1024\n", "hardware=a100")[1]
    assert cfg["model"]["max_prompt_tokens"] == 3072
    assert (
        cfg["explorer"]["rollout_model"]["model_path"] == "/m"
        and cfg["explorer"]["rollout_model"]["max_model_len"] == 4096
    )
    assert cfg["model"]["critic_model_path"] == "/m"  # upstream's default


def test_a_prompt_budget_you_set_is_kept(render):
    result, cfg = render(
        "model:\n  model_path: /m\n  max_model_len: 4096\n  max_response_tokens: 1024\n  max_prompt_tokens: 100\n",
        "hardware=a100",
    )
    assert result.code == 0 and cfg["model"]["max_prompt_tokens"] == 100


def test_response_longer_than_context_is_an_error(render):
    result, _ = render("model:\n  model_path: /m\n  max_model_len: 1024\n  max_response_tokens: 1024\n")
    assert (
        result.code == 2
        and "error: run.yaml:4:3: model.max_response_tokens: 1024 leaves no room for a prompt in "
        "model.max_model_len=1024"
        in result.err
    )


@pytest.mark.parametrize(
    "written,want",
    [
        ("  max_model_len: 4096\n", (4096, 2048, 2048)),  # upstream halves the context
        ("  max_model_len: 4096\n  max_prompt_tokens: 1000\n", (4096, 1000, 3096)),
        ("  max_prompt_tokens: 1000\n  max_response_tokens: 500\n", (1500, 1000, 500)),
        ("  max_response_tokens: 500\n", (None, None, 500)),  # nothing to divide
    ],
)
def test_the_token_budget_fills_what_is_unset_as_upstream_does(render, written, want):
    model = render("model:\n  model_path: /m\n" + written, "hardware=a100")[1]["model"]
    assert (model["max_model_len"], model["max_prompt_tokens"], model["max_response_tokens"]) == want


def test_prompt_plus_response_longer_than_the_context_is_an_error(render):
    result, _ = render(
        "model:\n  model_path: /m\n  max_model_len: 1000\n  max_prompt_tokens: 600\n  max_response_tokens: 600\n"
    )
    assert (
        result.code == 2
        and "run.yaml:4:3: model.max_prompt_tokens: 600 + max_response_tokens 600 exceed model.max_model_len=1000"
        in result.err
    )


def test_min_response_tokens_is_lowered_below_the_maximum_with_a_warning(render):
    result, cfg = render(
        "model:\n  model_path: /m\n  max_model_len: 16\n  max_response_tokens: 4\n  min_response_tokens: 4\n",
        "hardware=a100",
    )
    assert cfg["model"]["min_response_tokens"] == 3
    assert (
        "warning: run.yaml:5:3: model.min_response_tokens: 4 is not below model.max_response_tokens=4; using 3"
        in result.err
    )


def test_the_token_budget_per_device_follows_sequence_parallelism(render):
    cfg = render(
        "model:\n  model_path: /m\n  max_model_len: 3000\ntrainer:\n  ulysses_sequence_parallel_size: 4\n",
        "hardware=a100",
    )[1]
    assert cfg["trainer"]["max_token_len_per_gpu"] == 1500  # ceil(2 x 3000 / 4), upstream's rule


def test_enable_thinking_reaches_the_rollout_model(render):
    cfg = render("model:\n  model_path: /m\n  enable_thinking: false\n", "hardware=a100")[1]
    assert cfg["explorer"]["rollout_model"]["enable_thinking"] is False


def test_prompt_settings_reach_the_rollout_model_unless_it_has_its_own(render):
    cfg = render(
        "model:\n  model_path: /m\n  repetition_penalty: 1.2\n  enable_prompt_truncation: false\n", "hardware=a100"
    )[1]
    assert (
        cfg["explorer"]["rollout_model"]["repetition_penalty"],
        cfg["explorer"]["rollout_model"]["enable_prompt_truncation"],
    ) == (1.2, False)
    own = render(
        "model:\n  model_path: /m\n  repetition_penalty: 1.2\nexplorer:\n  rollout_model:\n    repetition_penalty: "
        "1.05\n",
        "hardware=a100",
    )[1]
    assert (
        own["explorer"]["rollout_model"]["repetition_penalty"],
        own["explorer"]["rollout_model"]["enable_prompt_truncation"],
    ) == (1.05, True)


def test_a_repetition_penalty_must_be_positive(render):
    result, _ = render("model:\n  model_path: /m\n  repetition_penalty: 0\n", "hardware=a100")
    assert (
        result.code == 2
        and "error: run.yaml:3:3: model.repetition_penalty: input should be greater than 0 (got 0)\n    allowed: > "
        "0.0\n"
        in result.err
    )


# --- tasksets and buffers -----------------------------------------------------------------

TASKSETS = """\
model:
  model_path: /m
  max_response_tokens: 64
  temperature: 0.7
algorithm:
  repeat_times: 4
buffer:
  explorer_input:
    taskset: {path: /d}
    eval_tasksets: [{path: /d}, {path: /d, default_workflow_type: arith_workflow, rollout_args: {temperature: 0}}]
    default_workflow_type: math_workflow
    default_eval_workflow_type: arith_workflow
  trainer_input:
    experience_buffer: {path: /e}
"""


def test_unnamed_tasksets_and_buffers_get_upstreams_names(render):
    cfg = render(TASKSETS, "hardware=a100")[1]["buffer"]
    assert cfg["explorer_input"]["taskset"]["name"] == "taskset_0"
    assert [t["name"] for t in cfg["explorer_input"]["eval_tasksets"]] == ["eval_taskset_0", "eval_taskset_1"]
    assert cfg["trainer_input"]["experience_buffer"]["name"] == "experience_buffer"
    assert cfg["trainer_input"]["experience_buffer"]["storage_type"] == "queue"  # upstream's default


def test_tasksets_take_the_inputs_workflow_evaluation_first(render):
    # a reward may name only what the taskset's workflow computes: the training set names its own
    text = TASKSETS.replace("taskset: {path: /d}", "taskset: {path: /d, default_reward_fn_type: math_reward}").replace(
        "    default_eval_workflow_type: arith_workflow\n",
        "    default_eval_workflow_type: arith_workflow\n    default_reward_fn_type: exact_match\n",
    )
    cfg = render(text, "hardware=a100")[1]["buffer"]["explorer_input"]
    assert cfg["taskset"]["default_workflow_type"] == "math_workflow"
    assert [t["default_workflow_type"] for t in cfg["eval_tasksets"]] == ["arith_workflow", "arith_workflow"]
    assert cfg["taskset"]["default_reward_fn_type"] == "math_reward"  # its own: the reward math_workflow computes
    assert {t["default_reward_fn_type"] for t in cfg["eval_tasksets"]} == {"exact_match"}


def test_sampling_defaults_come_from_the_model(render):
    cfg = render(TASKSETS, "hardware=a100")[1]["buffer"]["explorer_input"]
    train, first, greedy = (
        cfg["taskset"]["rollout_args"],
        cfg["eval_tasksets"][0]["rollout_args"],
        cfg["eval_tasksets"][1]["rollout_args"],
    )
    assert (train["temperature"], train["top_p"], train["max_tokens"]) == (0.7, 1.0, 64)
    assert (first["temperature"], greedy["temperature"]) == (0.7, 0)  # a taskset's own value wins
    assert (cfg["taskset"]["repeat_times"], cfg["eval_tasksets"][0]["repeat_times"]) == (4, 1)


def test_explain_names_the_model_as_the_source_of_a_tasksets_temperature(cli, write):
    result = cli(
        "config",
        "render",
        "-c",
        write("run.yaml", TASKSETS),
        "hardware=a100",
        "--explain",
        "buffer.explorer_input.taskset.rollout_args.temperature",
    )
    assert (
        result.code == 0 and "rule rollout_args" in result.out and "model.temperature=0.7 (run.yaml:4:3)" in result.out
    )


def test_training_rollouts_cannot_be_greedy_but_evaluation_may_be(render):
    result, _ = render(TASKSETS.replace("temperature: 0.7", "temperature: 0"), "hardware=a100")
    assert result.code == 2 and result.err.count("error:") == 1
    assert (
        "error: run.yaml:4:3: model.temperature: training rollouts are greedy (temperature 0), but the update "
        "divides logits by the temperature\n    allowed: > 0\n" in result.err
    )
    colocated, _ = render(TASKSETS.replace("temperature: 0.7", "temperature: 0"), "hardware=a100", "mode=colocate")
    # colocate trains too
    assert colocated.code == 2 and "model.temperature: training rollouts are greedy" in colocated.err
    assert (
        render(
            TASKSETS.replace("temperature: 0.7", "temperature: 0"),
            "hardware=a100",
            "algorithm.algorithm_type=sft",
            "mode=train",
        )[0].code
        == 0
    )
    assert render(TASKSETS.replace("temperature: 0.7", "temperature: 0"), "hardware=a100", "mode=explore")[0].code == 0


def test_training_tasksets_share_one_temperature(render):
    text = TASKSETS.replace(
        "taskset: {path: /d}", "tasksets: [{path: /d}, {path: /d, rollout_args: {temperature: 1.0}}]"
    )
    result, _ = render(text, "hardware=a100")
    assert result.code == 2
    assert (
        "model.temperature: training tasksets sample at different temperatures (model.temperature=0.7, "
        "buffer.explorer_input.tasksets.1.rollout_args.temperature=1.0)" in result.err
    )
    assert render(text.replace("temperature: 1.0", "temperature: 0.7"), "hardware=a100")[0].code == 0


def test_an_unknown_default_workflow_is_reported_once_where_it_is_written(render):
    result, _ = render(
        TASKSETS.replace("default_workflow_type: math_workflow", "default_workflow_type: mathh_workflow"),
        "hardware=a100",
    )
    assert result.code == 2 and result.err.count("unknown workflow 'mathh_workflow'") == 1
    assert "run.yaml:11:5: buffer.explorer_input.default_workflow_type: unknown workflow 'mathh_workflow'" in result.err


def test_a_taskset_without_a_workflow_is_an_error_unless_its_rows_name_theirs(render):
    text = "algorithm:\n  repeat_times: 4\nbuffer:\n  explorer_input:\n    taskset: {path: /d}\n"
    result, _ = render(text, "hardware=a100")
    assert (
        result.code == 2
        and "error: run.yaml:7:5: buffer.explorer_input.taskset.default_workflow_type: no workflow for this taskset"
        in result.err
    )
    result, cfg = render(text.replace("{path: /d}", "{path: /d, format: {workflow_key: wf}}"), "hardware=a100")
    assert result.code == 0 and cfg["buffer"]["explorer_input"]["taskset"]["format"]["workflow_key"] == "wf"


# --- intervals and checkpoints ------------------------------------------------------------


def test_eval_interval_is_rounded_to_a_multiple_of_the_sync_interval(render):
    result, cfg = render(
        "algorithm:\n  repeat_times: 4\nexplorer:\n  eval_interval: 10\nsynchronizer:\n  sync_interval: 4\n",
        "hardware=a100",
    )
    assert cfg["explorer"]["eval_interval"] == 8
    assert (
        "warning: run.yaml:6:3: explorer.eval_interval: 10 is not a multiple of synchronizer.sync_interval=4; using 8"
        in result.err
    )


@pytest.mark.parametrize("keep,want", [(0, None), (3, 3)])
def test_checkpoints_kept_follow_upstreams_key(render, keep, want):
    cfg = render(f"trainer:\n  max_checkpoints_to_keep: {keep}\n", "hardware=a100")[1]
    assert cfg["trainer"]["max_actor_ckpt_to_keep"] == want


def test_the_runtimes_checkpoint_count_is_derived_not_set(render):
    result, _ = render("trainer:\n  max_actor_ckpt_to_keep: 2\n", "hardware=a100")
    assert (
        result.code == 2
        and "trainer.max_actor_ckpt_to_keep: is derived from trainer.max_checkpoints_to_keep (None) and must not be "
        "set to 2"
        in result.err
    )


# --- the verl passthrough's shape ------------------------------------------------------------


def test_trainer_config_takes_verls_actor_rollout_ref_sections(render):
    result, cfg = render(
        "trainer:\n  trainer_config:\n    actor: {entropy_checkpointing: true}\n    actor_rollout_ref:\n      ref: "
        "{log_prob_use_dynamic_bsz: false}\n",
        "hardware=a100",
    )
    assert result.code == 0 and cfg["trainer"]["trainer_config"]["actor"] == {"entropy_checkpointing": True}


@pytest.mark.parametrize(
    "section,why",
    [
        ("critic", "this algorithm trains no critic (its advantage function reads no values)"),
        ("trainer", "trinity passes verl's actor_rollout_ref sections and, for a critic, critic"),
    ],
)
def test_trainer_config_sections_trinity_would_drop_are_errors(render, section, why):
    """The critic section only where the algorithm trains a critic (PPO: tests/config/test_algorithm.py)."""
    result, _ = render(f"trainer:\n  trainer_config:\n    {section}:\n      x: 1\n", "hardware=a100")
    assert (
        result.code == 2
        and f"run.yaml:5:5: trainer.trainer_config.{section}: not a verl section trinity passes on: {why}" in result.err
    )


# --- env --------------------------------------------------------------------------------


def test_env_when_blocks_follow_the_config(render):
    eager = render("explorer:\n  rollout_model:\n    enforce_eager: true\n", "hardware=ascend910b")[1]["env"]
    graph = render("explorer:\n  rollout_model:\n    enforce_eager: false\n", "hardware=ascend910b")[1]["env"]
    assert eager["rollout"]["TASK_QUEUE_ENABLE"] == "2" and graph["rollout"]["TASK_QUEUE_ENABLE"] == "1"
    assert eager["trainer"]["TASK_QUEUE_ENABLE"] == "2"
    colocate = render("mode: colocate\n", "hardware=ascend910b")[1]["env"]["common"]
    assert colocate["HCCL_HOST_SOCKET_PORT_RANGE"] == "auto" and colocate["HCCL_NPU_SOCKET_PORT_RANGE"] == "auto"


def test_an_env_when_block_never_replaces_what_you_wrote(render, cli, write):
    text = "explorer:\n  rollout_model:\n    enforce_eager: false\nenv:\n  rollout:\n    TASK_QUEUE_ENABLE: '7'\n"
    result, cfg = render(text, "hardware=ascend910b")
    assert result.code == 0 and cfg["env"]["rollout"]["TASK_QUEUE_ENABLE"] == "7"
    explained = cli(
        "config",
        "render",
        "-c",
        write("run.yaml", MINIMAL + text),
        "hardware=ascend910b",
        "--explain",
        "env.rollout.TASK_QUEUE_ENABLE",
    )
    assert (
        explained.code == 0
        and explained.out.startswith("env.rollout.TASK_QUEUE_ENABLE = '7'\n")
        and "env_when" not in explained.out
    )


def test_collective_timeout_covers_the_sync_timeout(render):
    env = render("synchronizer:\n  sync_timeout: 3600\n", "hardware=ascend910b")[1]["env"]["common"]
    assert env["HCCL_EXEC_TIMEOUT"] == "3600"
    short = render("synchronizer:\n  sync_timeout: 600\n", "hardware=ascend910b")[1]["env"]["common"]
    assert short["HCCL_EXEC_TIMEOUT"] == "1800"  # the profile's value is already long enough


def test_user_env_wins_and_a_short_timeout_warns(render):
    text = (
        "synchronizer:\n  sync_timeout: 3600\nenv:\n  common:\n    HCCL_EXEC_TIMEOUT: '600'\nexplorer:\n  "
        "env_vars:\n    VLLM_ASCEND_ENABLE_NZ: '1'\n"
    )
    result, cfg = render(text, "hardware=ascend910b")
    assert cfg["env"]["common"]["HCCL_EXEC_TIMEOUT"] == "600" and cfg["env"]["rollout"]["VLLM_ASCEND_ENABLE_NZ"] == "1"
    assert (
        "warning: run.yaml:7:5: env.common.HCCL_EXEC_TIMEOUT: HCCL_EXEC_TIMEOUT=600 is shorter than "
        "synchronizer.sync_timeout=3600" in result.err
    )


def test_recommended_values_sit_under_the_users_file(render):
    assert render("", "hardware=ascend910b")[1]["explorer"]["rollout_model"]["gpu_memory_utilization"] == 0.8
    mine = render("explorer:\n  rollout_model:\n    gpu_memory_utilization: 0.5\n", "hardware=ascend910b")[1]
    assert mine["explorer"]["rollout_model"]["gpu_memory_utilization"] == 0.5
    assert (
        render("", "hardware=ascend910b", "explorer.rollout_model.gpu_memory_utilization=0.6")[1]["explorer"][
            "rollout_model"
        ]["gpu_memory_utilization"]
        == 0.6
    )


# --- rollout engines ----------------------------------------------------------------------------


def test_cpu_profile_runs_the_transformers_engine(render):
    result, cfg = render("algorithm:\n  repeat_times: 2\n", "hardware=cpu")
    assert result.code == 0 and cfg["explorer"]["rollout_model"]["engine_type"] == "transformers"
    assert cfg["trainer"]["attn_implementation"] == "sdpa" and cfg["trainer"]["param_dtype"] == "float32"


def test_vllm_on_the_cpu_profile_is_allowed_and_transformers_stays_the_default(render):
    result, cfg = render(
        "algorithm:\n  repeat_times: 2\nexplorer:\n  rollout_model:\n    engine_type: vllm\n", "hardware=cpu"
    )
    assert result.code == 0 and result.err == "" and cfg["explorer"]["rollout_model"]["engine_type"] == "vllm"
    assert (
        render("algorithm:\n  repeat_times: 2\n", "hardware=cpu")[1]["explorer"]["rollout_model"]["engine_type"]
        == "transformers"
    )


def test_an_engine_the_hardware_lacks_is_refused_with_the_profiles_reason(cli, write):
    write(
        "profiles/novllm.yaml",
        "extends: cpu\nfacts:\n  rollout_engines: [transformers]\n  reasons:\n    rollout_engines: no vLLM build "
        "here\n",
    )
    text = MINIMAL + "explorer:\n  rollout_model:\n    engine_type: vllm\n"
    result = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", text),
        "hardware=novllm",
        "--profile-dir",
        write("profiles/.keep", "").parent,
    )
    assert (
        result.code == 2
        and "run.yaml:5:5: explorer.rollout_model.engine_type: 'vllm' does not run on novllm: no vLLM build here"
        in result.err
    )
    assert "allowed: transformers" in result.err


def test_transformers_engine_has_no_tensor_parallelism(cli):
    result = cli("config", "validate", "-c", REPO / "examples/gsm8k_sft_then_grpo/gsm8k_staged.yaml", "hardware=cpu")
    assert (
        result.code == 2
        and "gsm8k_staged.yaml:43:5: explorer.rollout_model.tensor_parallel_size: one transformers engine drives 1 "
        "device; TP x PP x DP = 2"
        in result.err
    )


@pytest.mark.parametrize(
    "profile,kernel",
    [
        ("a100", "sdpa"),
        ("h100", "sdpa"),
        ("h200", "sdpa"),
        ("ascend910b", "flash_attention_2"),
        ("ascend910c", "flash_attention_2"),
        ("cpu", "sdpa"),
    ],
)
def test_gpu_profiles_default_to_sdpa_and_npu_profiles_keep_flash_attention(render, profile, kernel):
    result, cfg = render("algorithm:\n  repeat_times: 2\n", f"hardware={profile}")
    assert result.code == 0 and cfg["trainer"]["attn_implementation"] == kernel


def test_flash_attention_stays_selectable_on_a_gpu_profile(render):
    result, cfg = render(
        "algorithm:\n  repeat_times: 2\ntrainer:\n  attn_implementation: flash_attention_2\n", "hardware=a100"
    )
    assert (
        result.code == 0
        and cfg["explorer"]["rollout_model"]["engine_type"] == "vllm"
        and cfg["trainer"]["attn_implementation"] == "flash_attention_2"
    )


@pytest.mark.parametrize(
    "profile,kernel,packs",
    [
        ("a100", None, False),  # sdpa: transformers attends a packed row with a dense block mask
        ("a100_40g", None, False),
        ("h100", None, False),
        ("h200", None, False),
        ("a100", "flash_attention_2", True),
        ("a100", "flash_attention_3", False),  # flash-attn's hopper build: not on an A100
        ("h100", "flash_attention_3", True),
        ("ascend910b", None, True),  # flash_attention_2 on torch_npu's npu_fusion_attention
        ("ascend910b4", None, True),
        ("ascend910c", None, True),
        ("ascend910b", "sdpa", False),
        ("cpu", None, False),
        ("cpu", "flash_attention_2", False),
    ],
)
def test_sequences_are_packed_where_the_attention_kernel_is_variable_length(render, profile, kernel, packs):
    text = "algorithm:\n  repeat_times: 2\n" + (f"trainer:\n  attn_implementation: {kernel}\n" if kernel else "")
    result, cfg = render(text, f"hardware={profile}")
    assert result.code == 0 and cfg["trainer"]["use_remove_padding"] is packs
    assert "use_remove_padding" not in result.err


def test_packing_is_explained_with_the_varlen_fact_and_the_attention_kernel(cli, write):
    path = write("run.yaml", MINIMAL)
    explained = cli("config", "render", "-c", path, "hardware=a100", "--explain", "trainer.use_remove_padding")
    assert explained.code == 0 and explained.out.startswith("trainer.use_remove_padding = False\n")
    assert re.search(
        r"rule remove_padding +False  <- a100\.varlen_attention=\['flash_attention_2'\] "
        r"\(\S*profiles/a100\.yaml:\d+:3\), "
        r"trainer\.attn_implementation='sdpa' \(the profile's: a100\.attn_implementation='sdpa' "
        r"\(\S*profiles/a100\.yaml:\d+:3\)\)$",
        explained.out,
        re.M,
    ), explained.out
    yours = write("run.yaml", MINIMAL + "trainer:\n  attn_implementation: flash_attention_3\n")
    explained = cli("config", "render", "-c", yours, "hardware=h200", "--explain", "trainer.use_remove_padding")
    assert re.search(
        r"rule remove_padding +True  <- h200\.varlen_attention=\['flash_attention_2', 'flash_attention_3'\] "
        r"\(\S*profiles/h200\.yaml:\d+:3\), trainer\.attn_implementation='flash_attention_3' \(run\.yaml:4:3\)$",
        explained.out,
        re.M,
    ), explained.out


def test_your_packing_without_a_variable_length_kernel_is_warned_about(render):
    result, cfg = render("trainer:\n  use_remove_padding: true\n", "hardware=a100")
    assert result.code == 0 and cfg["trainer"]["use_remove_padding"] is True  # your value stands
    assert (
        "warning: run.yaml:4:3: trainer.use_remove_padding: true packs each micro-batch into one row, and "
        "trainer.attn_implementation='sdpa' (the profile's: a100.attn_implementation='sdpa' (" in result.err
    )
    assert "is not one of the kernels with variable-length attention on a100, a100.varlen_attention=" in result.err
    assert "dense block mask over all its tokens, O(L^2) time and memory" in result.err
    assert "allowed: true with trainer.attn_implementation flash_attention_2; false" in result.err
    assert (
        "hint: set trainer.attn_implementation: flash_attention_2, or remove trainer.use_remove_padding to take the "
        "derived value (false with 'sdpa')" in result.err
    )
    # the CPU has no such kernel: only removing the key helps, and the profile's measured reason is given
    result = render("trainer:\n  use_remove_padding: true\n", "hardware=cpu")[0]
    assert result.code == 0 and re.search(r"cpu\.varlen_attention=\[\] \(\S*profiles/cpu\.yaml:\d+:3\)", result.err)
    assert "the demo's forward and backward took 137 ms packed against 84 ms padded" in result.err
    assert "allowed: false\n" in result.err and "hint: remove trainer.use_remove_padding" in result.err
    # a variable-length kernel of yours, or packing switched off: nothing to say
    for text in (
        "trainer:\n  use_remove_padding: true\n  attn_implementation: flash_attention_2\n",
        "trainer:\n  use_remove_padding: false\n",
    ):
        assert "use_remove_padding" not in render(text, "hardware=a100")[0].err


@pytest.mark.parametrize("yours", [True, False])
def test_your_use_remove_padding_wins_over_the_profile(render, yours):
    for profile in ("a100", "cpu"):
        text = f"algorithm:\n  repeat_times: 2\ntrainer:\n  use_remove_padding: {str(yours).lower()}\n"
        result, cfg = render(text, f"hardware={profile}")
        assert result.code == 0 and cfg["trainer"]["use_remove_padding"] is yours


@pytest.mark.parametrize("profile,fused", [("a100", False), ("ascend910b", False), ("cpu", True)])
def test_log_probs_are_fused_where_the_profile_says_it_pays(render, profile, fused):
    result, cfg = render("algorithm:\n  repeat_times: 2\n", f"hardware={profile}")
    assert result.code == 0 and cfg["trainer"]["use_fused_kernels"] is fused


@pytest.mark.parametrize("kind,fused", [("gpt2", False), ("gemma2", False), ("llama", True), ("qwen3", True)])
def test_log_probs_are_fused_only_for_a_model_type_verls_fused_forward_computes_alike(
    cli, write, tmp_path, kind, fused
):
    (tmp_path / "config.json").write_text(f'{{"model_type": "{kind}"}}')
    path = write("run.yaml", MINIMAL)
    args = ("hardware=cpu", f"model.model_path={tmp_path}", "--explain", "trainer.use_fused_kernels")
    result = cli("config", "render", "-c", path, *args)
    last = result.out.strip().splitlines()[-1]
    assert result.code == 0 and "rule fused_kernels" in last and last.split()[3] == str(fused), result.out
    assert f"model type '{kind}': {'one' if fused else 'not one'} of llama, mistral, qwen2, qwen3" in last


def test_your_use_fused_kernels_wins_over_the_profile(render):
    for profile, yours in (("cpu", False), ("a100", True)):
        result, cfg = render(f"trainer:\n  use_fused_kernels: {str(yours).lower()}\n", f"hardware={profile}")
        assert result.code == 0 and cfg["trainer"]["use_fused_kernels"] is yours


@pytest.mark.parametrize("profile,recomputes", [("a100", True), ("ascend910b", True), ("cpu", False)])
def test_activations_are_recomputed_where_the_profile_says_memory_needs_it(render, profile, recomputes):
    result, cfg = render("algorithm:\n  repeat_times: 2\n", f"hardware={profile}")
    assert result.code == 0 and cfg["trainer"]["enable_gradient_checkpointing"] is recomputes


def test_your_gradient_checkpointing_wins_over_the_profile(render):
    for profile, yours in (("cpu", True), ("a100", False)):
        text = f"trainer:\n  enable_gradient_checkpointing: {str(yours).lower()}\n"
        result, cfg = render(text, f"hardware={profile}")
        assert result.code == 0 and cfg["trainer"]["enable_gradient_checkpointing"] is yours


@pytest.mark.parametrize("profile,fused", [("a100", False), ("ascend910b", False), ("cpu", True)])
def test_the_optimizer_step_is_fused_where_the_profile_says_it_pays(render, cli, write, profile, fused):
    result, cfg = render("algorithm:\n  repeat_times: 2\n", f"hardware={profile}")
    assert result.code == 0 and cfg["trainer"]["fused_optimizer"] is fused
    explained = cli(
        "config",
        "render",
        "-c",
        write("run.yaml", MINIMAL),
        f"hardware={profile}",
        "--explain",
        "trainer.fused_optimizer",
    )
    assert explained.code == 0 and "rule fused_optimizer" in explained.out
    assert f"{profile}.fused_optimizer={fused}" in explained.out


def test_your_fused_optimizer_wins_over_the_profile(render):
    for profile, yours in (("cpu", False), ("a100", True)):
        result, cfg = render(f"trainer:\n  fused_optimizer: {str(yours).lower()}\n", f"hardware={profile}")
        assert result.code == 0 and cfg["trainer"]["fused_optimizer"] is yours


def test_sgd_takes_no_fused_step_even_where_the_profile_fuses(render, cli, write):
    sgd = "algorithm:\n  optimizer:\n    optimizer_type: sgd\n"
    result, cfg = render(sgd, "hardware=cpu")
    assert result.code == 0 and cfg["trainer"]["fused_optimizer"] is False
    explained = cli(
        "config",
        "render",
        "-c",
        write("run.yaml", MINIMAL + sgd),
        "hardware=cpu",
        "--explain",
        "trainer.fused_optimizer",
    )
    assert explained.code == 0 and "optimizer_type='sgd' (run.yaml:5:5): not one of adam, adamw" in explained.out
    assert render("algorithm:\n  optimizer:\n    optimizer_type: adamw\n", "hardware=cpu")[1]["trainer"][
        "fused_optimizer"
    ]


def test_your_fused_sgd_is_refused_by_name(render):
    result, _ = render(
        "trainer:\n  fused_optimizer: true\nalgorithm:\n  optimizer:\n    optimizer_type: sgd\n", "hardware=a100"
    )
    assert result.code == 2
    assert (
        "run.yaml:4:3: trainer.fused_optimizer: torch's fused sgd step does not run on FSDP2's sharded parameters"
        in result.err
    )
    assert "hint: set trainer.fused_optimizer=false, or algorithm.optimizer.optimizer_type=adamw" in result.err


def threads(cfg):
    return {role: cfg["env"][role].get("OMP_NUM_THREADS") for role in ("trainer", "rollout")}


@pytest.mark.parametrize(
    "overrides,expected",
    [
        # strictly on-policy: rollout and training take turns, each with the node's 4 slots (3 ranks: 1 each)
        ((), {"trainer": "1", "rollout": "4"}),
        (("explorer.rollout_model.engine_num=2",), {"trainer": "2", "rollout": "2"}),
        (("mode=colocate",), {"trainer": "1", "rollout": "4"}),
        # the explorer may run ahead, or several explore steps share one sync: each actor keeps its own slots
        (("synchronizer.sync_offset=1",), {"trainer": "1", "rollout": "1"}),
        (("synchronizer.sync_interval=2",), {"trainer": "1", "rollout": "1"}),
        (("synchronizer.sync_style=explorer_driven",), {"trainer": "1", "rollout": "1"}),
        (
            (
                "explorer.rollout_model.engine_type=vllm",
                "explorer.rollout_model.tensor_parallel_size=2",
                "mode=explore",
            ),
            {"trainer": None, "rollout": "2"},
        ),
        # training alone: the ranks share the node, here a rank on every slot
        (("mode=train",), {"trainer": "1", "rollout": None}),
        (("mode=explore",), {"trainer": None, "rollout": "1"}),  # the engine alone: its own slots
    ],
)
def test_roles_that_take_turns_compute_with_the_nodes_slots(render, overrides, expected):
    text = "algorithm:\n  repeat_times: 2\ncluster:\n  gpu_per_node: 4\n"
    result, cfg = render(text, "hardware=cpu", *overrides)
    assert result.code == 0, result.err
    assert threads(cfg) == expected


@pytest.mark.parametrize(
    "rl,threads",
    [
        ((), "2"),  # the RL stage takes turns: its rank, and the SFT rank kept for it, compute with both cores
        (("+stages.1.synchronizer.sync_offset=1",), "1"),  # the explorer runs ahead: one each, in both stages
        (("synchronizer.sync_interval=2",), "1"),  # the run's own setting, which both stages take
        (("+stages.1.mode=colocate",), "1"),  # colocated: both stages put a rank on every slot
    ],
)
def test_a_train_only_stage_gives_its_rank_the_threads_of_the_stage_it_is_kept_for(cli, write, rl, threads):
    path = write("run.yaml", MINIMAL + STAGED)
    ranks = {}
    for stage in ("sft", "rl"):
        args = ("hardware=cpu", "cluster.gpu_per_node=2", "--stage", stage, "--format", "json", *rl)
        result = cli("config", "render", "-c", path, *args)
        assert result.code == 0, result.err
        ranks[stage] = result.json()["env"]["trainer"]["OMP_NUM_THREADS"]
    assert ranks == {"sft": threads, "rl": threads}  # equal env: the handover keeps the rank


def test_the_stage_a_train_only_stage_is_kept_for_is_read_with_its_interpolations(cli, write, monkeypatch):
    monkeypatch.setenv("OFFSET", "0")
    rl = "{stage_name: rl, synchronizer: {sync_offset: '${oc.env:OFFSET}'}}"
    stages = f"stages:\n  - {{stage_name: sft, mode: train}}\n  - {rl}\n"
    path = write("run.yaml", MINIMAL + stages)
    ranks = {}
    for stage in ("sft", "rl"):
        args = ("hardware=cpu", "cluster.gpu_per_node=2", "--stage", stage, "--format", "json")
        result = cli("config", "render", "-c", path, *args)
        assert result.code == 0, result.err
        ranks[stage] = result.json()["env"]["trainer"]["OMP_NUM_THREADS"]
    assert ranks == {"sft": "2", "rl": "2"}  # offset 0: the RL stage takes turns, read so from both stages


def test_a_train_only_stage_between_two_rl_stages_is_laid_out_for_the_next(cli, write):
    """The launch keeps a stage's actors for the next stage: an SFT stage hands over to the RL stage after it."""
    stages = (
        "stages:\n  - {stage_name: first, synchronizer: {sync_offset: 1}}\n  - {stage_name: sft, mode: train}\n"
        "  - {stage_name: second}\n"
    )
    path = write("run.yaml", MINIMAL + stages)
    args = ("hardware=cpu", "cluster.gpu_per_node=2", "--stage", "sft", "--format", "json")
    result = cli("config", "render", "-c", path, *args)
    assert result.code == 0, result.err
    assert result.json()["env"]["trainer"]["OMP_NUM_THREADS"] == "2"  # the second takes turns; the first did not


def test_two_train_only_stages_keep_a_rank_on_every_slot_with_one_thread_each(cli, write):
    path = write("run.yaml", MINIMAL + STAGED)
    args = ("hardware=cpu", "cluster.gpu_per_node=2", "--stage", "sft", "--format", "json", "+stages.1.mode=train")
    result = cli("config", "render", "-c", path, *args)
    assert result.code == 0, result.err
    rendered = result.json()
    assert (rendered["cluster"]["trainer_gpu_num"], rendered["env"]["trainer"]["OMP_NUM_THREADS"]) == (2, "1")


@pytest.mark.parametrize("overrides", [(), ("mode=colocate",), ("mode=train",), ("mode=explore",)])
def test_a_profile_that_does_not_share_the_node_keeps_each_actor_to_its_slots(render, write, overrides):
    own = write("profiles/ownslots.yaml", "extends: cpu\nfacts:\n  compute_threads:\n    turns_share_node: false\n")
    text = "algorithm:\n  repeat_times: 2\ncluster:\n  gpu_per_node: 4\n"
    result, cfg = render(text, "hardware=ownslots", "--profile-dir", own.parent, *overrides)
    assert result.code == 0, result.err
    assert set(threads(cfg).values()) - {None} == {"1"}


def test_threads_are_the_profiles_to_size_and_yours_to_set(render, cli, write):
    result, cfg = render("algorithm:\n  repeat_times: 2\n", "hardware=a100")
    assert result.code == 0 and threads(cfg) == {"trainer": None, "rollout": None}  # an accelerator computes
    for yours in ("env.common.OMP_NUM_THREADS='3'", "env.trainer.OMP_NUM_THREADS='3'"):
        result, cfg = render("algorithm:\n  repeat_times: 2\n", "hardware=cpu", yours)
        assert result.code == 0 and cfg["env"]["trainer"].get("OMP_NUM_THREADS", "3") == "3"
    explained = cli("config", "render", "-c", write("run.yaml", MINIMAL), "hardware=cpu", "--explain", "env.rollout")
    assert explained.code == 0 and "rule compute_threads" in explained.out
    assert "'turns_share_node': True} (" in explained.out  # the fact, with where the profile says it


def test_fsdp1_on_the_cpu_profile_is_refused_with_the_reason(cli, write):
    result = cli(
        "config", "validate", "-c", write("run.yaml", MINIMAL + "trainer:\n  trainer_strategy: fsdp\n"), "hardware=cpu"
    )
    assert (
        result.code == 2
        and "'fsdp' does not run on cpu: FSDP1 syncs module states through an accelerator" in result.err
        and "allowed: fsdp2" in result.err
    )


# --- edges the mutation run found untested -------------------------------------------------


def test_a_response_budget_without_a_context_length_derives_nothing(render):
    result, cfg = render("model:\n  model_path: /m\n  max_response_tokens: 512\n", "hardware=a100")
    assert (
        result.code == 0
        and cfg["model"]["max_prompt_tokens"] is None
        and cfg["explorer"]["rollout_model"]["max_model_len"] is None
    )


def test_a_rollout_model_path_you_set_is_kept(render):
    result, cfg = render("explorer:\n  rollout_model:\n    model_path: /models/served\n", "hardware=a100")
    assert (
        result.code == 0
        and cfg["explorer"]["rollout_model"]["model_path"] == "/models/served"
        and cfg["model"]["model_path"] == "/models/tiny"
    )


def test_a_collective_timeout_equal_to_the_sync_timeout_is_enough(render, cli, write):
    mine, cfg = render(
        "synchronizer:\n  sync_timeout: 1800\nenv:\n  common:\n    HCCL_EXEC_TIMEOUT: '1800'\n", "hardware=ascend910b"
    )
    assert mine.code == 0 and mine.err == "" and cfg["env"]["common"]["HCCL_EXEC_TIMEOUT"] == "1800"
    named, cfg = render("env:\n  common:\n    HCCL_EXEC_TIMEOUT: auto\n", "hardware=ascend910b")
    # not a number: yours, unchecked
    assert named.code == 0 and named.err == "" and cfg["env"]["common"]["HCCL_EXEC_TIMEOUT"] == "auto"
    # the profile's 1800 already covers a sync timeout of 1800: no rule rewrites it
    path = write("run.yaml", MINIMAL + "synchronizer:\n  sync_timeout: 1800\n")
    explained = cli("config", "render", "-c", path, "hardware=ascend910b", "--explain", "env.common.HCCL_EXEC_TIMEOUT")
    assert (
        explained.code == 0
        and explained.out.startswith("env.common.HCCL_EXEC_TIMEOUT = '1800'\n")
        and "rule" not in explained.out
    )


BARE_PROFILE = """name: bare
description: a chip that says no without saying why
facts:
  vendor: none
  device_type: cpu
  chip: bare
  ray_resource_key: CPU
  ray_request: none
  collective_backend: gloo
  devices_per_node: 8
  dtypes: [bfloat16, float32]
  torch_compile_training: false
  trainer_strategies: [fsdp2]
"""


def test_a_refusal_without_a_reason_in_the_profile(cli, write, tmp_path):
    write("profiles/bare.yaml", BARE_PROFILE)
    path = write("run.yaml", MINIMAL + "trainer:\n  use_torch_compile: true\n  trainer_strategy: fsdp\n")
    result = cli("config", "validate", "-c", path, "hardware=bare", "--profile-dir", tmp_path / "profiles")
    assert result.code == 2
    assert (
        "error: run.yaml:4:3: trainer.use_torch_compile: torch.compile cannot be used for training on bare: the "
        "hardware profile says it is unsupported\n" in result.err
    )
    assert (
        "error: run.yaml:5:3: trainer.trainer_strategy: 'fsdp' does not run on bare\n    allowed: fsdp2\n" in result.err
    )
