"""The GPU smoke script keeps working: its CPU path runs here (the GPU path runs on a GPU machine)."""

import json
import subprocess
import sys

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
