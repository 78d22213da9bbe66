"""scripts/device_ipc_check.py, what of it runs without an accelerator: the layout it checks (the colocated run
hardware=auto resolves here, as the launcher gives its roles their env) and its answer on a machine without one.
On a GPU or an NPU it runs whole: /work/shared/gpu/check.sh's `ipc` step."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import device_ipc_check  # noqa: E402


def test_the_checked_layout_is_two_trainer_ranks_of_which_only_the_first_is_beside_an_engine():
    config, platform, trainer_env, rollout_env, beside = device_ipc_check.layout()
    assert config.mode == "colocate" and beside == [True, False]
    assert trainer_env["TRINITY_DEVICE"] == rollout_env["TRINITY_DEVICE"] == platform.device_type
    assert str(ROOT) in trainer_env["PYTHONPATH"].split(":")  # Ray's workers import the project


def test_without_an_accelerator_it_says_so_and_fails():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "device_ipc_check.py")], capture_output=True)
    assert result.returncode == 1
    assert json.loads(result.stdout) == {"error": "no accelerator here: device IPC needs a GPU or an NPU", "ok": False}
