"""The GPU smoke script keeps working: its CPU path runs here (the GPU path runs on a GPU machine)."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_smoke_script_cpu_path(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("ray")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_smoke.py"), "--allow-cpu"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["profile"] == "cpu" and report["process_group_backend"] == "cpu:gloo"
    assert report["distributed"]["device_all_reduce"] == [3.0] * 4 and report["ray"]["device"] == "cpu"


def test_smoke_script_refuses_to_pass_without_a_device(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_smoke.py")], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "no accelerator found" in json.loads(proc.stdout)["error"]


def test_smoke_train_step_runs_the_demo_and_reports_each_step(tmp_path):
    """--train through the CPU path with the transformers engine (the GPU run uses vllm, which cannot be installed here)."""
    pytest.importorskip("verl")
    command = [sys.executable, str(REPO / "scripts" / "gpu_smoke.py"), "--allow-cpu", "--train", "--engine", "transformers", "--sft-steps", "1", "--steps", "2"]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    train = json.loads(proc.stdout)["train"]
    assert train["exit_code"] == 0 and "explorer.rollout_model.engine_type=transformers" in train["command"]
    assert [s["step"] for s in train["steps"]] == [2, 3]
    for step in train["steps"]:
        assert 0 <= step["reward"] <= 1 and step["tokens_per_s"] > 0 and step["sync_s"] > 0 and step["sync_method"] == "gloo"
