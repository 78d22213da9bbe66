"""The RFC's device API: one decision, config > $TRINITY_DEVICE > detection."""

import pytest

from tests.conftest import REFERENCE
from tests.fakes import fake_machine
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.errors import ConfigError
from trinity.utils import device


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("TRINITY_DEVICE", raising=False)
    device.reset()
    yield
    device.reset()


EXPECTED = {
    "npu": ("NPU", "hccl", "cpu:gloo,npu:hccl"),
    "cuda": ("GPU", "nccl", "cpu:gloo,cuda:nccl"),
    "cpu": ("CPU", "gloo", "cpu:gloo"),
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_trinity_device_answers_every_question(monkeypatch, kind):
    monkeypatch.setenv("TRINITY_DEVICE", kind)
    assert device.get_device_type() == device.get_device_name() == kind
    assert (
        device.get_ray_resource_key(),
        device.get_collective_backend(),
        device.get_process_group_backend(),
    ) == EXPECTED[kind]
    assert (device.is_npu(), device.is_cuda(), device.is_cpu()) == (kind == "npu", kind == "cuda", kind == "cpu")
    assert device.decide().source == f"$TRINITY_DEVICE={kind}"


def test_resolved_config_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("TRINITY_DEVICE", "cuda")
    hardware = resolve(Request(REFERENCE, ("hardware=ascend910b",))).config.hardware
    device.use_hardware(hardware)
    assert device.get_device_type() == "npu" and device.get_ray_resource_key() == "NPU"
    assert device.decide().source == "profile ascend910b"


def test_detection_is_the_last_resort():
    assert device.decide(fake_machine(gpu="NVIDIA H200")).platform.device_type == "cuda"
    device.reset()
    assert (
        device.decide(fake_machine(npu_chip="Ascend 910B3")).source == "detected: 8 x Ascend 910B3 from npu-smi info -m"
    )


def test_the_decision_is_made_once(monkeypatch):
    monkeypatch.setenv("TRINITY_DEVICE", "npu")
    assert device.get_device_type() == "npu"
    monkeypatch.setenv("TRINITY_DEVICE", "cuda")
    assert device.get_device_type() == "npu"


def test_a_bad_trinity_device_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TRINITY_DEVICE", "gpu")
    with pytest.raises(ConfigError) as err:
        device.get_device_type()
    issue = err.value.issues[0]
    assert (
        issue.message == "'gpu' is not a device type"
        and issue.allowed == "cuda, npu, cpu"
        and issue.key == "TRINITY_DEVICE"
    )
