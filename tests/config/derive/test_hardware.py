"""Rules of trinity/config/derive/hardware.py, each through `trinity config render/validate`:
the trainer's device, backend, compile, strategy, dtypes, engines, attention and kernels from the profile.
"""

import re

import pytest

from tests.conftest import MINIMAL, REPO


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


def test_fsdp1_on_the_cpu_profile_is_refused_with_the_reason(cli, write):
    result = cli(
        "config", "validate", "-c", write("run.yaml", MINIMAL + "trainer:\n  trainer_strategy: fsdp\n"), "hardware=cpu"
    )
    assert (
        result.code == 2
        and "'fsdp' does not run on cpu: FSDP1 syncs module states through an accelerator" in result.err
        and "allowed: fsdp2" in result.err
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
