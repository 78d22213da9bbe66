"""What every role actor shares: a light constructor (so a launch can be checked before anything
heavy starts) taking keyword arguments only, a placement report, and a log file of its own in the
run directory. A role that starts processes of its own (vLLM's) also has `close()`, which teardown
calls before Ray kills it."""

import logging
import os
import resource
import sys
from pathlib import Path


class Role:
    """Base of the role actors: explorer, rollout engine, trainer rank, synchronizer, buffer."""

    def __init__(
        self, *, name: str, role: str, visible_devices_env: str | None = None, log_dir: str | None = None
    ) -> None:
        self.name, self.role, self.visible_devices_env = name, role, visible_devices_env
        self.log = _logger(name, log_dir)

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

    def peak_rss_mb(self) -> float:
        """Peak resident memory of this process, in MiB."""
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1024 if sys.platform != "darwin" else peak / 2**20


def _logger(name: str, log_dir: str | None) -> logging.Logger:
    log = logging.getLogger(f"trinity.{name}")
    log.setLevel(logging.INFO)
    if log_dir and not log.handlers:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(Path(log_dir) / f"{name}.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
    return log
