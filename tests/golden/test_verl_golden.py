"""verl's trainer config for every shipped profile, built and validated by verl's dataclasses on CPU,
matches its committed golden file; drift fails with the command that rewrites them."""

import json
import subprocess
import sys

import pytest

from tests.golden.verl_configs import HERE, PROFILES, REPO, UPDATE

pytest.importorskip("verl")


@pytest.fixture(scope="module")
def renders():
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "golden" / "verl_configs.py"), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("profile", PROFILES)
def test_verl_config_matches_golden(renders, profile):
    path = HERE / f"{profile}.yaml"
    assert path.exists(), f"no verl golden for {profile}; create it with: {UPDATE}"
    assert renders[profile] == path.read_text(), (
        f"{path.relative_to(REPO)} drifted; if the change is intended, run: {UPDATE}"
    )


def test_every_golden_is_a_shipped_profile():
    assert sorted(p.stem for p in HERE.glob("*.yaml")) == PROFILES


def test_the_platform_and_device_verl_gets_differ_only_where_the_hardware_does(renders):
    import yaml

    a100, npu = yaml.safe_load(renders["a100"]), yaml.safe_load(renders["ascend910b"])
    assert (a100["trainer"]["device"], a100["verl_env"]["VERL_PLATFORM"]) == ("cuda", "nvidia")
    assert (npu["trainer"]["device"], npu["verl_env"]["VERL_PLATFORM"]) == ("npu", "huawei")
    # the attention kernel is the one hardware difference: the gpu extra installs no flash-attn, NPUs run it on
    # torch_npu; packing follows it (sdpa has no variable-length kernel: a packed row gets a dense block mask)
    kernels = [cfg["actor_rollout_ref"]["model"].pop("override_config") for cfg in (a100, npu)]
    assert kernels == [{"attn_implementation": "sdpa"}, {"attn_implementation": "flash_attention_2"}]
    packed = [
        (
            cfg["actor_rollout_ref"]["model"].pop("use_remove_padding"),
            cfg["actor_rollout_ref"]["actor"].pop("use_remove_padding"),
        )
        for cfg in (a100, npu)
    ]
    assert packed == [(False, False), (True, True)]
    assert a100["actor_rollout_ref"] == npu["actor_rollout_ref"]  # the reference config turns torch.compile off on both
