"""Hardware profiles: the shipped set, user folders, `extends`, and broken profiles."""

import os

import pytest

from tests.conftest import MINIMAL, PROFILES, REFERENCE

SHIPPED = sorted(PROFILES)


def test_profile_list_shows_every_shipped_profile(cli):
    result = cli("profile", "list")
    assert result.code == 0
    for name in SHIPPED:
        assert f"\n{name} " in "\n" + result.out
    rows = {row["name"]: row for row in cli("profile", "list", "--format", "json").json()}
    assert set(rows) == set(SHIPPED)
    assert rows["ascend910c"]["extends"] == "ascend910b" and rows["ascend910c"]["devices_per_node"] == 16
    assert rows["h200"]["device_type"] == "cuda"


def test_extends_inherits_and_overrides(cli, write):
    path = write("run.yaml", MINIMAL)
    cfg = cli("config", "render", "-c", path, "hardware=ascend910c", "--format", "json").json()
    assert cfg["hardware"]["devices_per_node"] == 16 and cfg["hardware"]["collective_backend"] == "hccl"
    assert cfg["env"]["trainer"]["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"


def test_the_a100_40g_profile_is_an_a100_with_40_gb(cli, write):
    path = write("run.yaml", MINIMAL)
    small, big = (
        cli("config", "render", "-c", path, f"hardware={name}", "--format", "json").json()["hardware"]
        for name in ("a100_40g", "a100")
    )
    assert (small["memory_gb_per_device"], big["memory_gb_per_device"]) == (40, 80)
    assert small["source"].endswith("profiles/a100_40g.yaml") and small["chip"] == "NVIDIA A100 40GB"
    same = ("device_type", "devices_per_node", "attn_implementation", "varlen_attention", "trainer_strategies")
    assert {k: small[k] for k in same} == {k: big[k] for k in same}


def test_plan_memory_on_an_a100_40g_plans_40_gib_devices(cli):
    result = cli("plan", "memory", "-c", REFERENCE, "hardware=a100_40g")
    assert result.code == 0 and result.out.startswith("memory plan for a100_40g: 40 GiB per device\n")
    assert " of 40.0 GiB (" in result.out and "80" not in result.out.split("\n")[0]
    assert "gpu_memory_utilization 0.7 x 40 GiB" in result.out
    planned = cli("plan", "memory", "-c", REFERENCE, "hardware=a100_40g", "--format", "json")
    assert planned.code == 0 and planned.json()["hardware"] == "a100_40g"
    assert [plan["device_memory_bytes"] for plan in planned.json()["plans"]] == [40 * 2**30]


SITE = """\
extends: ascend910b
description: our cluster
env:
  common:
    HCCL_SOCKET_IFNAME: bond0
    GLOO_SOCKET_IFNAME: bond0
"""


def test_site_profile_from_a_flag(cli, write, tmp_path):
    write("site/mysite.yaml", SITE)
    path = write("run.yaml", MINIMAL)
    cfg = cli(
        "config", "render", "-c", path, "hardware=mysite", "--profile-dir", tmp_path / "site", "--format", "json"
    ).json()
    assert cfg["hardware"]["name"] == "mysite" and cfg["hardware"]["device_type"] == "npu"
    assert cfg["env"]["common"]["HCCL_SOCKET_IFNAME"] == "bond0"
    assert cfg["env"]["common"]["HCCL_CONNECT_TIMEOUT"] == "1200"  # inherited


def test_site_profile_from_the_environment(cli, write, tmp_path, monkeypatch):
    write("site/mysite.yaml", SITE)
    monkeypatch.setenv("TRINITY_PROFILE_PATH", str(tmp_path / "site"))
    assert "mysite" in [row["name"] for row in cli("profile", "list", "--format", "json").json()]
    path = write("run.yaml", MINIMAL)
    assert cli("config", "render", "-c", path, "hardware=mysite").code == 0


def test_a_user_profile_shadows_a_shipped_one(cli, write, tmp_path):
    write("site/h100.yaml", "extends: h200\nfacts:\n  memory_gb_per_device: 40\n")
    path = write("run.yaml", MINIMAL)
    cfg = cli(
        "config", "render", "-c", path, "hardware=h100", "--profile-dir", tmp_path / "site", "--format", "json"
    ).json()
    assert cfg["hardware"]["memory_gb_per_device"] == 40 and cfg["hardware"]["chip"] == "NVIDIA H200"


BROKEN = {
    "cycle through a shadowed shipped profile": (
        {"a100.yaml": "extends: h200\n"},  # h200 extends a100, which is now this file
        "h200",
        ["a100.yaml:1:1: extends: profiles extend each other in a cycle: h200 -> a100 -> h200"],
    ),
    "extends cycle": (
        {"p1.yaml": "extends: p2\n", "p2.yaml": "description: x\nextends: p1\n"},
        "p1",
        ["p2.yaml:2:1: extends: profiles extend each other in a cycle: p1 -> p2 -> p1"],
    ),
    "extends an unknown profile": (
        {"p1.yaml": "extends: ascend910z\n"},
        "p1",
        ["p1.yaml:1:1: hardware: unknown hardware profile 'ascend910z'", "did you mean 'ascend910b' or 'ascend910c'?"],
    ),
    "name differs from file": (
        {"p1.yaml": "name: other\nextends: a100\n"},
        "p1",
        ["p1.yaml:1:1: name: profile is named 'other' but its file is p1.yaml"],
    ),
    "fact with a wrong type": (
        {"p1.yaml": "extends: a100\nfacts:\n  devices_per_node: eight\n"},
        "p1",
        ["p1.yaml:3:3: facts.devices_per_node: input should be a valid integer"],
    ),
    "unknown fact": (
        {"p1.yaml": "extends: a100\nfacts:\n  devices_per_nod: 4\n"},
        "p1",
        ["p1.yaml:3:3: facts.devices_per_nod: unknown key", "did you mean 'devices_per_node'?"],
    ),
    "missing facts": (
        {"p1.yaml": "description: nothing else\n"},
        "p1",
        ["p1.yaml: facts: required, and no layer sets it"],
    ),
    "recommended value of the wrong type": (
        {"p1.yaml": "extends: a100\nrecommended:\n  explorer:\n    rollout_model:\n      enforce_eager: maybe\n"},
        "p1",
        ["p1.yaml:5:7: explorer.rollout_model.enforce_eager: input should be a valid boolean"],
    ),
    "profile yaml syntax error": (
        {"p1.yaml": "facts: [\n"},
        "p1",
        ["p1.yaml:2:1: YAML syntax error"],
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_profiles_are_reported_with_their_location(cli, write, tmp_path, case):
    files, name, expected = BROKEN[case]
    for filename, text in files.items():
        write(f"site/{filename}", text)
    path = write("run.yaml", MINIMAL)
    result = cli("config", "validate", "-c", path, f"hardware={name}", "--profile-dir", tmp_path / "site")
    assert result.code == 2
    for line in expected:
        assert line in result.err, f"{line!r} not in:\n{result.err}"


def test_edited_profile_is_reread(cli, write, tmp_path):
    site = write("site/p1.yaml", "extends: a100\nfacts:\n  devices_per_node: 4\n")
    path = write("run.yaml", MINIMAL)
    args = ("config", "render", "-c", path, "hardware=p1", "--profile-dir", tmp_path / "site", "--format", "json")
    assert cli(*args).json()["cluster"]["gpu_per_node"] == 4
    site.write_text("extends: a100\nfacts:\n  devices_per_node: 2\n")
    os.utime(site, ns=(1, 10**18))
    assert cli(*args).json()["cluster"]["gpu_per_node"] == 2
