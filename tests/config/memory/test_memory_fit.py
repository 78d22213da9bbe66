"""The memory fit through `trinity config validate`, `trinity plan memory` and `trinity run`, with numbers worked out by
hand."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

from tests.conftest import MINIMAL, REFERENCE

pytestmark = pytest.mark.usefixtures("local_gsm8k")  # the reference config reads its data from local disk

GIB = 1 << 30
QWEN7 = "model.model_path=Qwen/Qwen2.5-7B-Instruct"
GPU16 = """\
extends: a100
description: a 16 GB GPU
facts:
  chip: NVIDIA 16GB
  memory_gb_per_device: 16
detect:
  names: []
"""

# Qwen2.5-7B (models.csv): L=28, h=3584, i=18944, 28 heads and 4 KV heads of 128, V=152064, untied, q/k/v biases.
P7 = 7_615_616_512  # 2*152064*3584 + 3584 + 28 * LAYER7
LAYER7 = 233_057_792  # 2*3584*3584 + 2*3584*512 + (3584 + 2*512) + 3*3584*18944 + 2*3584
ROOT7 = 1_089_998_336  # 2*152064*3584 + 3584
T = 8192  # trainer.max_token_len_per_gpu of the reference config
ACT7 = T * (28 * 2 * 3584 + (16 * 3584 + 4 * (3584 + 512) + 8 * 18944) + 8 * 3584)  # checkpointed
LOGITS7 = 8 * T * 152064


def trainer7(devices: int) -> int:
    """Peak bytes of the 7B trainer: weights + Adam + runtime, then the actor update (above the reference phase)."""
    held = 4 * P7 // devices + 8 * P7 // devices + GIB
    update = 4 * P7 // devices + 4 * (ROOT7 + 2 * LAYER7) + ACT7 + LOGITS7
    return held + update


def checks(result, role: str) -> list[dict]:
    return [c for plan in result.json()["plans"] for c in plan["checks"] if c["role"] == role]


def test_a_7b_trainer_on_two_910b_devices_does_not_fit_and_says_what_would(cli):
    result = cli("config", "validate", "-c", REFERENCE, "hardware=ascend910b", QWEN7)
    assert result.code == 2 and result.out == ""
    assert trainer7(2) == 81_913_337_856  # 76.3 GiB: 119 % of a 64 GiB device
    assert (
        "override 'model.model_path=Qwen/Qwen2.5-7B-Instruct': model.model_path: trainer (Qwen/Qwen2.5-7B-Instruct, "
        "FSDP over 2 devices, 8192 tokens per micro-batch) does not fit on ascend910b: it needs 76.3 GiB per device "
        "and gets 64.0 GiB (119%)" in result.err
    )
    assert "explorer.rollout_model.engine_num=3 (3 trainer devices, needs 57.4 GiB per device)" in result.err
    assert "cluster.gpu_per_node=7 (3 trainer devices" in result.err


def test_the_same_7b_run_with_four_trainer_devices_fits(cli):
    result = cli(
        "plan",
        "memory",
        "-c",
        REFERENCE,
        "hardware=ascend910b",
        QWEN7,
        "explorer.rollout_model.engine_num=2",
        "--format",
        "json",
    )
    assert result.code == 0, result.err
    (trainer,) = checks(result, "trainer")
    assert trainer["need_bytes"] == trainer7(4) == 51_450_871_808  # 47.9 GiB, 75 %
    assert trainer["status"] == "fits" and trainer["peak_phase"] == "actor update" and trainer["devices"] == 4
    assert (
        cli(
            "config", "validate", "-c", REFERENCE, "hardware=ascend910b", QWEN7, "explorer.rollout_model.engine_num=2"
        ).code
        == 0
    )


def test_a_suggested_change_makes_it_fit(cli):
    assert (
        cli(
            "config", "validate", "-c", REFERENCE, "hardware=ascend910b", QWEN7, "explorer.rollout_model.engine_num=3"
        ).code
        == 0
    )


def test_one_config_fits_a_910b_and_not_a_910b4(cli):
    args = ("-c", REFERENCE, QWEN7, "explorer.rollout_model.engine_num=2")
    assert cli("config", "validate", *args, "hardware=ascend910b").code == 0
    result = cli("config", "validate", *args, "hardware=ascend910b4")
    assert (
        result.code == 2
        and "does not fit on ascend910b4: it needs 47.9 GiB per device and gets 32.0 GiB (150%)" in result.err
    )


def test_qwen25_15b_fits_both_910b_variants(cli):
    for profile, share in (("ascend910b", 0.38), ("ascend910b4", 0.77)):
        result = cli("plan", "memory", "-c", REFERENCE, f"hardware={profile}", "--format", "json")
        assert result.code == 0 and result.json()["fits"] is True
        statuses = {c["role"]: c["status"] for c in result.json()["plans"][0]["checks"]}
        assert statuses == {"trainer": "fits", "explorer.rollout_model": "fits"}
        (trainer,) = checks(result, "trainer")
        assert round(trainer["share"], 2) == share
        validated = cli("config", "validate", "-c", REFERENCE, f"hardware={profile}")
        # only the reference's sync_method warning
        assert validated.code == 0 and "1 warning(s)" in validated.out and "fit" not in validated.err


def test_a_7b_vllm_engine_at_half_of_16gb_does_not_fit_and_nothing_starts(write, tmp_path):
    write("site/gpu16.yaml", GPU16)
    ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # a Ray of its own: empty afterwards means none started
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_TMPDIR": ray_tmp}
    args = [
        "run",
        "-c",
        str(REFERENCE),
        "--profile-dir",
        "site",
        "hardware=gpu16",
        "mode=explore",
        QWEN7,
        "explorer.rollout_model.gpu_memory_utilization=0.5",
        "explorer.rollout_model.engine_num=1",
    ]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "trinity", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        started = os.listdir(ray_tmp)
    finally:
        subprocess.run(["rm", "-rf", ray_tmp])
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert (
        "explorer.rollout_model.gpu_memory_utilization: vLLM engine (Qwen/Qwen2.5-7B-Instruct, 1 device per engine) "
        "does not fit on gpu16: it needs 16.3 GiB per device and gets 8.0 GiB (gpu_memory_utilization 0.5 x 16 GiB) "
        "(204%)" in proc.stderr
    )
    assert (
        "weights (bfloat16, 1/1 shard) 14.2 GiB" in proc.stderr
        and "explorer.rollout_model.tensor_parallel_size=4 (needs 5.1 GiB per device)" in proc.stderr
    )


def test_an_unknown_model_is_a_note_not_a_failure(cli, write):
    path = write("run.yaml", MINIMAL)
    result = cli("config", "validate", "-c", path, "hardware=a100")
    assert result.code == 0 and "valid for a100 (cuda)" in result.out
    assert (
        "note: run.yaml:2:3: model.model_path: memory fit not checked: '/models/tiny' is neither a local folder with "
        "a config.json nor a model in trinity's table of common models" in result.err
    )
    shown = cli("plan", "memory", "-c", path, "hardware=a100", "--format", "json")
    assert (
        shown.code == 0
        and shown.json()["plans"][0]["checks"] == []
        and shown.json()["plans"][0]["unchecked"][0]["key"] == "model.model_path"
    )


def test_a_profile_without_device_memory_is_a_note(cli):
    result = cli("config", "validate", "-c", REFERENCE, "hardware=cpu")
    assert result.code == 0
    assert (
        "/profiles/cpu.yaml: hardware.memory_gb_per_device: memory fit not checked: the cpu profile states no device "
        "memory" in result.err
    )


def test_tight_is_a_warning_and_an_error_under_strict(cli):
    args = (
        "-c",
        REFERENCE,
        "hardware=ascend910b",
        QWEN7,
        "explorer.rollout_model.engine_num=3",
        "synchronizer.sync_method=online",
    )
    tight = cli("config", "validate", *args, "trainer.max_token_len_per_gpu=9216")
    assert tight.code == 0 and "1 warning(s)" in tight.out
    assert (
        "warning: override 'model.model_path=Qwen/Qwen2.5-7B-Instruct': model.model_path: trainer "
        "(Qwen/Qwen2.5-7B-Instruct, FSDP over 3 devices, 9216 tokens per micro-batch) is tight on ascend910b: it "
        "needs 59.0 GiB per device and gets 64.0 GiB (92%, over 90%)" in tight.err
    )
    assert "trainer.max_token_len_per_gpu=4608 (needs" in tight.err
    strict = cli("config", "validate", *args, "trainer.max_token_len_per_gpu=9216", "--strict")
    assert strict.code == 2 and "is tight on ascend910b" in strict.err and "(an error under --strict)" in strict.err


def test_plan_memory_prints_the_breakdown_even_when_it_does_not_fit(cli):
    result = cli("plan", "memory", "-c", REFERENCE, "hardware=ascend910b", QWEN7)
    assert result.code == 2
    assert (
        "trainer (Qwen/Qwen2.5-7B-Instruct, FSDP over 2 devices, 8192 tokens per micro-batch): 76.3 GiB of 64.0 GiB "
        "(119%): DOES NOT FIT" in result.out
    )
    assert "  actor update (peak)\n" in result.out and "  reference log-probs\n" in result.out
    assert "    logits (8192 tokens x 152064 vocabulary, bf16)" in result.out
    assert "  would fit with: explorer.rollout_model.engine_num=3" in result.out
    assert "trinity: 1 problem in the config" in result.err


def test_plan_memory_json_carries_the_numbers(cli):
    result = cli("plan", "memory", "-c", REFERENCE, "hardware=ascend910b", QWEN7, "--format", "json")
    assert result.code == 2
    data = result.json()
    plan = data["plans"][0]
    assert data["fits"] is False and plan["device_memory_bytes"] == 64 * GIB and plan["models"][0]["parameters"] == P7
    (trainer,) = checks(result, "trainer")
    assert (
        trainer["need_bytes"] == trainer7(2)
        and trainer["capacity_bytes"] == 64 * GIB
        and trainer["status"] == "does not fit"
    )
    assert sum(i["bytes"] for i in trainer["items"] if i["phase"] in ("", "actor update")) == trainer7(2)
    assert trainer["knobs"][0] == {
        "change": "explorer.rollout_model.engine_num=3",
        "need": trainer7(3),
        "effect": "3 trainer devices",
    }
    assert [i["severity"] for i in data["issues"]] == ["warning", "error"]


def test_validate_json_carries_the_numbers(cli):
    result = cli("config", "validate", "-c", REFERENCE, "hardware=ascend910b", "--format", "json")
    assert result.code == 0
    (plan,) = result.json()["memory"]
    assert plan["fits"] is True and {c["role"] for c in plan["checks"]} == {"trainer", "explorer.rollout_model"}


def test_each_stage_is_checked_on_its_own(cli):
    staged = REFERENCE.parents[1] / "gsm8k_sft_then_grpo" / "gsm8k_staged.yaml"
    result = cli("plan", "memory", "-c", staged, "hardware=ascend910b", "--format", "json")
    assert result.code == 0, result.err
    phases = {
        plan["stage"]: {i["phase"] for c in plan["checks"] if c["role"] == "trainer" for i in c["items"]}
        for plan in result.json()["plans"]
    }
    assert "reference log-probs" not in phases["sft_warmup"]  # SFT keeps no reference model
    assert "reference log-probs" in phases["rft"]


COLOCATE7 = (
    "-c",
    REFERENCE,
    "hardware=ascend910b",
    QWEN7,
    "mode=colocate",
    "cluster.gpu_per_node=8",
    "explorer.rollout_model.engine_num=8",
)
BUDGET7 = int(0.85 * 64 * GIB)  # vLLM's budget when it wakes, at gpu_memory_utilization 0.85
IDLE7 = 4 * P7 // 8 + 8 * P7 // 8 + GIB  # the trainer between updates: weights, Adam moments, runtime (8 devices)
CACHE7 = 2 * 20 * 2**20 * (28 + 2)  # expandable segments: 2 pages of 20 MiB of each of 28 + 1 units' ranges + 1
PIECE7 = 152064 * 3584 * 2  # the largest piece: the bf16 embedding, larger than a 256 MiB bucket
GATHERED7 = 152064 * 3584 * 4  # the embedding as FSDP gathers it: fp32


@pytest.fixture
def colocate7(cli, ascend_driver_here):
    """`trinity <command> COLOCATE7 ...` on a node whose Ascend driver maps device memory again (device IPC)."""
    ascend_driver_here("25.3.rc1")
    return lambda command, *more: cli(*command.split(), *COLOCATE7, *more)


def test_colocate_counts_what_the_trainer_keeps_while_vllm_runs(colocate7):
    result = colocate7("config validate", "explorer.rollout_model.gpu_memory_utilization=0.85")
    assert result.code == 2  # 67.2 GiB: vLLM's 54.4 beside the trainer's 11.6 and its cache
    assert BUDGET7 + IDLE7 + CACHE7 == 72_167_013_017
    assert (
        "rollout and trainer on one device (colocate) does not fit on ascend910b: it needs 67.2 GiB per device and "
        "gets 64.0 GiB (105%)" in result.err
    )
    assert "trainer.param_offload=true trainer.optimizer_offload=true (needs 56.6 GiB per device)" in result.err
    offloaded = colocate7(
        "plan memory",
        "explorer.rollout_model.gpu_memory_utilization=0.85",
        "trainer.param_offload=true",
        "trainer.optimizer_offload=true",
    )
    assert offloaded.code == 0 and "rollout and trainer on one device (colocate): 56.6 GiB of 64.0 GiB" in offloaded.out


def test_colocate_counts_the_trainers_allocator_cache_and_the_sync_beside_the_engines_weights(colocate7):
    """A sync wakes vLLM's weights alone (runtime/driver/device_handoff.py): the trainer's sync buffers sit beside
    them and the engine's runtime, not beside its whole budget, which wakes once they are gone."""
    result = colocate7("plan memory", "explorer.rollout_model.gpu_memory_utilization=0.3", "--format", "json")
    (shared,) = checks(result, "colocate")
    items = {i["label"]: (i["bytes"], i["phase"]) for i in shared["items"]}
    cache = "trainer allocator cache after empty_cache (handed back before the engines wake; 2 x 20 MiB of 30 ranges)"
    assert items[cache] == (CACHE7, "") and CACHE7 == 1_258_291_200
    buffers = "weight sync: the piece's buffer exported to the engines (device IPC) and the one before it, which they "
    assert items[buffers + "may still map"] == (2 * PIECE7, "weight sync")
    gathered = "weight sync: one weight as FSDP gathers it (fp32), cast into the buffer"
    assert items[gathered] == (GATHERED7, "weight sync")
    assert items["vLLM runtime and weights (its KV cache asleep)"] == (GIB + 2 * P7, "weight sync")
    assert items["vLLM budget (gpu_memory_utilization 0.3)"] == (int(0.3 * 64 * GIB), "engines generate")
    sync = GIB + 2 * P7 + 2 * PIECE7 + GATHERED7  # 19.25 GiB: more than the budget of 19.2 GiB
    assert shared["peak_phase"] == "weight sync" and shared["need_bytes"] == IDLE7 + CACHE7 + sync


def test_a_run_that_does_not_fit_fails_the_dry_run_too(cli):
    result = cli("run", "--dry-run", "-c", REFERENCE, "hardware=ascend910b", QWEN7)
    assert result.code == 2 and result.out == "" and "does not fit on ascend910b" in result.err


def test_json_of_plan_memory_is_one_document(cli):
    result = cli("plan", "memory", "-c", REFERENCE, "hardware=a100", "--format", "json")
    assert result.code == 0 and json.loads(result.out)["hardware"] == "a100"


def test_each_suggested_engine_change_makes_vllm_start(cli, write):
    write("site/gpu16.yaml", GPU16)
    args = (
        "-c",
        REFERENCE,
        "--profile-dir",
        "site",
        "hardware=gpu16",
        "mode=explore",
        "model.max_model_len=131072",
        "explorer.rollout_model.gpu_memory_utilization=0.4",
        "explorer.rollout_model.engine_num=3",
    )
    result = cli("config", "validate", *args)
    # one sequence of 131072 tokens: 2 x 28 layers x 2 KV heads x 128 x 2 bytes = 28672 bytes per token, 3.5 GiB
    assert result.code == 2 and "KV cache for one sequence of 131072 tokens 3.5 GiB" in result.err
    # 8 devices: more than the 6 there are
    assert (
        cli("config", "validate", *args[:-1], "explorer.rollout_model.engine_num=4").err.count("tensor_parallel_size=")
        == 0
    )
    changes = [
        "explorer.rollout_model.tensor_parallel_size=2",
        "explorer.rollout_model.gpu_memory_utilization=0.60",
        "model.max_model_len=46336",
    ]
    for change in changes:
        assert f"{change} (needs" in result.err
        assert cli("config", "validate", *args, change).code == 0, change


def test_the_algorithm_decides_reference_and_critic(cli):
    def phases(*overrides):
        result = cli("plan", "memory", "-c", REFERENCE, "hardware=a100", *overrides, "--format", "json")
        (trainer,) = checks(result, "trainer")
        return {i["phase"] for i in trainer["items"]} - {"", "weight sync"}

    assert phases() == {"actor update", "reference log-probs"}  # GRPO with its default KL loss
    assert phases("algorithm.kl_loss_fn=none") == {"actor update"}
    assert phases("algorithm.kl_loss_fn=low_var_kl") == {"actor update", "reference log-probs"}
    # a KL penalty in the reward needs the reference's log-probs too
    assert phases("algorithm.kl_loss_fn=none", "algorithm.kl_penalty_fn=k2") == {"actor update", "reference log-probs"}
    # a distillation teacher: forward only, its own phase (its shape from the catalog, like the model's)
    teacher = ("algorithm.algorithm_type=on_policy_distill", "+model.teacher_model_path=Qwen/Qwen2.5-7B-Instruct")
    assert phases(*teacher) == {"actor update", "teacher log-probs"}


def test_a_kv_cache_too_small_for_every_sequence_is_a_warning(cli):
    result = cli(
        "config",
        "validate",
        "-c",
        REFERENCE,
        "hardware=a100",
        QWEN7,
        "mode=explore",
        "explorer.rollout_model.gpu_memory_utilization=0.25",
    )
    # 2 x 28 layers x 4 KV heads x 128 x 2 bytes = 57344 bytes per token; 8 runners x 8 repeats = 64 sequences of 2048
    # tokens
    assert result.code == 0 and "1 warning(s)" in result.out
    assert (
        "gsm8k.yaml:15:3: model.max_model_len: vLLM KV cache (Qwen/Qwen2.5-7B-Instruct): the KV cache for 64 "
        "sequences of 2048 tokens need 7.0 GiB, more than the budget left after weights, workspace and runtime (room "
        "for 34 of them), 3.8 GiB; vLLM will queue the sequences that do not fit" in result.err
    )


@pytest.mark.parametrize("most,sequences", [(None, 64), (8, 64), (3, 24), (1, 8)])
def test_the_kv_cache_counts_the_rollouts_a_runner_runs_at_once(cli, most, sequences):
    """With explorer.max_repeat_times_per_runner a runner runs at most that many of a task's 8 rollouts at once: the
    engine's 8 runners send 8 x min(8, most) sequences."""
    split = () if most is None else (f"explorer.max_repeat_times_per_runner={most}",)
    result = cli("plan", "memory", "-c", REFERENCE, "hardware=a100", QWEN7, "mode=explore", *split)
    assert result.code == 0 and f"KV cache for {sequences} sequences of 2048 tokens" in result.out
