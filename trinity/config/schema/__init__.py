"""Pydantic models of the run config and of hardware profiles."""

from .hardware import HardwareFacts, HardwareProfile, HardwareSection
from .run import RunConfig, StageConfig

__all__ = ["HardwareFacts", "HardwareProfile", "HardwareSection", "RunConfig", "StageConfig"]
