"""The GPU smoke script keeps working: its CPU path runs here (the GPU path runs on a GPU machine)."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_smoke_script_cpu_path(tmp_path):
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


def test_one_device_machines_get_a_private_ray_declaring_two_devices_that_every_process_sees(tmp_path):
    """gpu_smoke.py --train on a single-GPU (or NPU) machine: engine and trainer share the device."""
    ray = pytest.importorskip("ray")
    from types import SimpleNamespace

    sys.path.insert(0, str(REPO / "scripts"))
    from smoke_train import _shared_ray

    hardware = SimpleNamespace(ray_request="resources", ray_resource_key="NPU", noset_visible_devices_env="RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES")
    head = _shared_ray(hardware, {**__import__("os").environ, "RAY_AUTH_MODE": "disabled"})
    try:
        address = head.stdout.readline().strip()
        ray.init(address=address, log_to_driver=False)

        @ray.remote(num_cpus=0, resources={"NPU": 1})
        def env():
            import os

            return os.environ.get("RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"), os.environ.get("ASCEND_RT_VISIBLE_DEVICES")

        assert ray.cluster_resources()["NPU"] == 2
        assert ray.get(env.remote(), timeout=120) == ("1", None)  # Ray leaves the device list alone: the process sees the machine's device
    finally:
        ray.shutdown()
        head.stdin.close()
        assert head.wait(120) == 0
