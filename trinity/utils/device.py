"""The device API of the RFC, answered from one decision made once per process.

Decision order: the resolved config's hardware (`use_hardware`), else $TRINITY_DEVICE
(cuda/npu/cpu), else detection. Ray hides accelerators from actors that did not ask for one,
so actors must never detect: the launcher hands every actor $TRINITY_DEVICE (see
`trinity.launch.runtime_env`), and detection is only the driver's last resort.

The functions below are the RFC's public API, kept for code outside trinity (a user's workflow or reward, a verl
worker of their own; docs/hardware-profiles.md). trinity's own code reads the platform record's fields instead:
`is_npu()` and its like answer a question trinity never branches on.
"""

import os
from dataclasses import dataclass

from ..errors import ConfigError, Issue
from ..platforms import PLATFORMS, Platform
from ..platforms.detect import Probes, detect

DEVICE_ENV = "TRINITY_DEVICE"
HARDWARE_ENV = "TRINITY_HARDWARE"


@dataclass(frozen=True)
class Decision:
    """The device of this process and where that answer came from."""

    platform: Platform
    ray_resource_key: str
    collective_backend: str
    source: str


_decision: Decision | None = None


def use_hardware(hardware) -> Decision:
    """Decide from a resolved config's `hardware` section (a HardwareSection); it wins over everything."""
    global _decision
    _decision = Decision(
        PLATFORMS[hardware.device_type],
        hardware.ray_resource_key,
        hardware.collective_backend,
        f"profile {hardware.name}",
    )
    return _decision


def reset() -> None:
    """Forget the decision (tests, or a driver that resolves a second config)."""
    global _decision
    _decision = None


def decide(probes: Probes | None = None) -> Decision:
    """The process's decision, made on first use."""
    global _decision
    if _decision is None:
        _decision = _from_env() or _from_detection(probes or Probes())
    return _decision


def _from_env() -> Decision | None:
    value = os.environ.get(DEVICE_ENV)
    if value is None:
        return None
    if value not in PLATFORMS:
        raise ConfigError(
            [
                Issue(
                    f"{value!r} is not a device type",
                    key=DEVICE_ENV,
                    source="environment",
                    allowed=", ".join(PLATFORMS),
                    hint=f"unset {DEVICE_ENV} to detect the device",
                )
            ]
        )
    platform = PLATFORMS[value]
    return Decision(platform, platform.ray_resource_key, platform.collective_backend, f"${DEVICE_ENV}={value}")


def _from_detection(probes: Probes) -> Decision:
    found = detect(probes)
    platform = PLATFORMS[found.device_type]
    return Decision(platform, platform.ray_resource_key, platform.collective_backend, f"detected: {found.summary()}")


def get_device_type() -> str:
    """'cuda', 'npu' or 'cpu'."""
    return decide().platform.device_type


def is_npu() -> bool:
    """Whether this process runs on Ascend NPUs."""
    return get_device_type() == "npu"


def is_cuda() -> bool:
    """Whether this process runs on NVIDIA GPUs."""
    return get_device_type() == "cuda"


def is_cpu() -> bool:
    """Whether this process has no accelerator."""
    return get_device_type() == "cpu"


def get_device_name() -> str:
    """The torch device type, as in torch.device(get_device_name()) and getattr(torch, name)."""
    return get_device_type()


def get_ray_resource_key() -> str:
    """The Ray resource standing for one device: 'GPU', 'NPU' or 'CPU'."""
    return decide().ray_resource_key


def get_collective_backend() -> str:
    """torch.distributed backend between devices: 'nccl', 'hccl' or 'gloo'."""
    return decide().collective_backend


def get_process_group_backend() -> str:
    """Composite backend of an FSDP process group, e.g. 'cpu:gloo,npu:hccl'."""
    return decide().platform.process_group_backend()


def empty_cache() -> None:
    """Hand the device blocks torch caches back to the device (nothing where this process never imported torch)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.accelerator.is_available():
        torch.accelerator.empty_cache()
