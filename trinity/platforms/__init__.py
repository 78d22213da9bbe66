"""The platform registry: one record per device type; errors list the valid names."""

from ..errors import ConfigError, Issue
from .base import SHARED_FACTS, Platform
from .cpu import CPU
from .cuda import CUDA
from .npu import NPU

PLATFORMS: dict[str, Platform] = {p.device_type: p for p in (CUDA, NPU, CPU)}


def get_platform(device_type: str, source: str = "") -> Platform:
    """The platform of a device type, or a ConfigError naming the valid ones."""
    if device_type not in PLATFORMS:
        raise ConfigError([Issue(f"unknown device type {device_type!r}", source=source, allowed=", ".join(PLATFORMS))])
    return PLATFORMS[device_type]


def accelerator_keys() -> set[str]:
    """Ray resource keys that stand for accelerators (GPU, NPU)."""
    return {p.ray_resource_key for p in PLATFORMS.values() if p.ray_request != "none"}


__all__ = ["PLATFORMS", "SHARED_FACTS", "Platform", "accelerator_keys", "get_platform"]
