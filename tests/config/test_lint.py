"""`trinity profile lint` and `trinity profile show`: a planted bad profile for every rule."""

import pytest

from trinity.config import lint as lint_module
from trinity.platforms.ray_constants import RayAccelerator, _read, ray_accelerators

GOOD = "extends: a100\n"
BAD = {
    "unknown key": ("facts:\n  devices_per_nod: 4\nextends: a100\n", "p.yaml:2:3: facts.devices_per_nod: unknown key"),
    "extends cycle": ("extends: p\n", "p.yaml:1:1: extends: profiles extend each other in a cycle: p -> p"),
    "env name": (
        "extends: a100\nenv:\n  common:\n    BAD-NAME: x\n",
        "p.yaml:4:5: env.common.BAD-NAME: string should match pattern",
    ),
    "env value not a string": (
        "extends: a100\nenv:\n  rollout:\n    NCCL_CUMEM_ENABLE: 0\n",
        "p.yaml:4:5: env.rollout.NCCL_CUMEM_ENABLE: input should be a valid string (got 0)",
    ),
    "contradicting facts": (
        "extends: a100\nfacts:\n  device_type: npu\n",
        "a100.yaml:11:3: facts.collective_backend: 'nccl' contradicts device_type 'npu', whose platform uses 'hccl'",
    ),
    "unknown when key": (
        "extends: a100\nenv_when:\n  - when: {explorer.rollout_model.enforce_eagr: true}\n    rollout: {A: '1'}\n",
        "p.yaml:3:12: env_when[0].when.explorer.rollout_model.enforce_eagr: is not a run-config key",
    ),
    "bad recommendation": (
        "extends: a100\nrecommended:\n  explorer:\n    rollout_model:\n      gpu_memory_utilization: 2\n",
        "p.yaml:5:7: explorer.rollout_model.gpu_memory_utilization: input should be less than or equal to 1",
    ),
    "yaml syntax": ("extends: [a100\n", "p.yaml:2:1: YAML syntax error"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_rule_reports_location_and_message(cli, write, case):
    text, expected = BAD[case]
    path = write("site/p.yaml", text)
    result = cli("profile", "lint", path)
    assert result.code == 2, result.out
    assert expected in result.out, result.out
    problems = cli("profile", "lint", path, "--format", "json").json()["problems"]
    assert problems and problems[0]["severity"] == "error"
    first = problems[0]
    where = f"{first['file'].rsplit('/', 1)[-1]}:{first['line']}:{first['col']}: "
    assert expected.startswith(where + (f"{first['key']}: " if first["key"] else ""))


def test_shipped_profiles_are_clean(cli):
    result = cli("profile", "lint")
    assert result.code == 0 and result.out.startswith(
        "checked 8 profile(s) (a100, a100_40g, ascend910b, ascend910b4, ascend910c, cpu, h100, h200): 0 error(s)"
    )


def test_a_folder_is_linted_file_by_file(cli, write, tmp_path):
    write("site/good.yaml", GOOD)
    write("site/bad.yaml", "extends: a100\nfacts:\n  chipp: x\n")
    report = cli("profile", "lint", tmp_path / "site", "--format", "json").json()
    assert report["checked"] == ["bad", "good"] and report["ok"] is False
    assert [(p["line"], p["col"], p["key"]) for p in report["problems"]] == [(3, 3, "facts.chipp")]


def test_missing_target(cli, tmp_path):
    result = cli("profile", "lint", tmp_path / "nope.yaml")
    assert result.code == 2 and "no such profile file or folder" in result.err


def test_names_are_checked_against_the_installed_ray(cli, write, monkeypatch):
    renamed = RayAccelerator(
        "GPU",
        "CUDA_DEVICES_RENAMED",
        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
        "ray/_private/accelerators/nvidia_gpu.py",
    )
    monkeypatch.setattr(lint_module, "ray_accelerators", lambda: {**ray_accelerators(), "GPU": [renamed]})
    result = cli("profile", "lint", write("site/p.yaml", GOOD))
    assert "facts.visible_devices_env: 'CUDA_VISIBLE_DEVICES' is not what Ray uses for GPU" in result.out
    assert "allowed: CUDA_DEVICES_RENAMED" in result.out and result.code == 2


def test_ray_constants_are_read_from_source_without_importing_ray(tmp_path):
    module = tmp_path / "npu.py"
    module.write_text(
        'X_VISIBLE = "ASCEND_RT_VISIBLE_DEVICES"\nNOSET_ASCEND_RT_VISIBLE_DEVICES_ENV_VAR = (\n    '
        '"RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"\n)\n'
        "class NPUAcceleratorManager:\n    @staticmethod\n    def get_resource_name():\n        return 'NPU'\n"
        "    @staticmethod\n    def get_visible_accelerator_ids_env_var():\n        return X_VISIBLE\n"
    )
    found = _read(module)
    assert (found.resource, found.visible_devices_env, found.noset_visible_devices_env) == (
        "NPU",
        "ASCEND_RT_VISIBLE_DEVICES",
        "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES",
    )


def test_profile_show_names_the_file_of_every_value(cli):
    result = cli("profile", "show", "ascend910c")
    lines = result.out.splitlines()
    assert lines[0].startswith("ascend910c: ") and "ascend910c.yaml -> " in lines[0]
    chip = next(line for line in lines if line.startswith("facts.chip:"))
    backend = next(line for line in lines if line.startswith("facts.collective_backend:"))
    assert '"Ascend910C"' in chip and chip.endswith("ascend910c.yaml:8:3")
    assert backend.endswith("ascend910b.yaml:12:3")
    data = cli("profile", "show", "h200", "--format", "json").json()
    assert data["profile"]["facts"]["memory_gb_per_device"] == 141 and data["sources"]["facts.vendor"].endswith(
        "a100.yaml:6:3"
    )
