"""Versions that work together: one table in the code, the same pins in pyproject.toml's extras and the
README, and `trinity doctor` naming an installed pair that cannot work."""

import re
import tomllib

import pytest
from hypothesis import given, strategies as st

from tests.conftest import REPO
from tests.fakes import fake_machine
from trinity import paths
from trinity.cli.doctor import diagnose
from trinity.platforms.versions import CANN, KNOWN, VLLM, pair_problems, release


def extras():
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


@pytest.mark.parametrize("extra", ["gpu", "npu"])
def test_the_extras_pin_the_known_versions(extra):
    found = extras()
    pins = dict(re.fullmatch(r"([\w-]+)(?:\[\w+\])?==(\S+)", r).groups() for r in found[extra] + found["runtime"] if "==" in r)
    assert {d: pins[d] for d in KNOWN[extra] if d != "vllm" or extra == "gpu"} == {d: v for d, v in KNOWN[extra].items() if d != "vllm" or extra == "gpu"}
    assert "trinity[runtime]" in found[extra]


def test_the_readme_table_shows_the_known_versions():
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("### Versions that work together") :]
    for extra, versions in KNOWN.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{extra}`"))
        assert all(v in row for v in versions.values()), row
    assert CANN in table and VLLM in table


@given(major=st.integers(0, 30), minor=st.integers(0, 30), tail=st.sampled_from(["", "+cpu", ".post4", "rc1", "+cu128", ".dev20250101"]))
def test_release_drops_local_post_and_pre_tags(major, minor, tail):
    assert release(f"{major}.{minor}.0{tail}") == f"{major}.{minor}.0"


def test_the_known_pairs_are_healthy():
    assert pair_problems(KNOWN["npu"]) == [] and pair_problems(KNOWN["gpu"]) == []


def test_a_plugin_built_for_another_release_is_an_error():
    found = pair_problems({"vllm": "0.23.0", "vllm-ascend": "0.18.0", "torch": "2.11.0", "torch_npu": "2.10.0.post4"})
    assert [(s, m) for s, m, _ in found] == [
        ("error", "vllm-ascend 0.18.0 is built for vllm 0.18.0, but vllm 0.23.0 is installed"),
        ("error", "torch_npu 2.10.0.post4 is built for torch 2.10.0, but torch 2.11.0 is installed"),
    ]
    assert found[1][2] == "pip install torch==2.10.0, or the torch_npu release matching torch 2.11.0"


def test_doctor_reports_a_mismatched_pair_and_an_untested_vllm():
    machine = fake_machine(gpu="NVIDIA H100", versions={"torch": "2.10.0+cu128", "vllm": "0.24.0", "vllm-ascend": "0.23.0"})
    found = {p["message"]: p["severity"] for p in diagnose(machine, paths.profile_dirs())["problems"]}
    assert found["vllm-ascend 0.23.0 is built for vllm 0.23.0, but vllm 0.24.0 is installed"] == "error"
    assert found[f"trinity is tested with vllm {VLLM}; vllm 0.24.0 is installed"] == "note"
