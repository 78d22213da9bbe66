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
        check=True, capture_output=True, timeout=300,
    )
    return next(out.glob("trinity-*.whl"))


def test_wheel_contains_the_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "trinity/conf/config.yaml" in names
    assert {"trinity/profiles/ascend910b.yaml", "trinity/profiles/a100.yaml", "trinity/profiles/cpu.yaml"} <= set(names)
    assert "trinity/examples/grpo_gsm8k/gsm8k.yaml" in names
    plugin = {f"hydra_plugins/trinity_profiles/{f}" for f in ("__init__.py", "plugin.py", "resolvers.py", "_facts.py", "verl.yaml")}
    assert plugin <= set(names)
    assert "hydra_plugins/__init__.py" not in names  # a namespace package, shared with other Hydra plugins
    assert "trinity/config/memory/models.csv" in names and "trinity/profiles/ascend910b4.yaml" in names
    assert "trinity/examples/arith/arith.yaml" in names


def test_installed_wheel_finds_its_data_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}
    probe = "import trinity.paths as p; print(p.data_dir('profiles'))"
    where = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert where.stdout.strip() == str(site / "trinity" / "profiles")
    result = subprocess.run(
        [sys.executable, "-m", "trinity", "config", "render", "hardware=ascend910b", "--format", "json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
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
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "npu huawei"
