"""Pydantic models of the run config and of hardware profiles."""

from .hardware import HardwareFacts, HardwareProfile, HardwareSection
from .model import LoRAConfig
from .run import RunConfig, StageConfig

__all__ = ["HardwareFacts", "HardwareProfile", "HardwareSection", "LoRAConfig", "RunConfig", "StageConfig"]
