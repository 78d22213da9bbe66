"""The process Ray starts for each role. Until the training runtime lands it only reports where it
runs and what it sees, so a launch can be checked against its plan; it never pretends to train."""

import os
from typing import Optional


class RoleActor:
    """Placeholder for a role's process: explorer, rollout engine, trainer rank or synchronizer."""

    def __init__(self, name: str, role: str, visible_devices_env: Optional[str]):
        self.name, self.role, self.visible_devices_env = name, role, visible_devices_env

    def report(self) -> dict:
        """Node, devices Ray assigned, and the device decision this process received."""
        import ray

        from ..utils import device

        visible = os.environ.get(self.visible_devices_env) if self.visible_devices_env else None
        return {
            "name": self.name,
            "role": self.role,
            "node_id": ray.get_runtime_context().get_node_id(),
            "visible_devices": visible,
            "device": device.get_device_type(),
            "hardware": os.environ.get(device.HARDWARE_ENV),
            "pid": os.getpid(),
        }
