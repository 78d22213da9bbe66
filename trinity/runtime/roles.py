"""What every role actor shares: a light constructor (so a launch can be checked before anything
heavy starts) taking keyword arguments only, a placement report, and a log file of its own in the
run directory. A role that starts processes of its own (vLLM's) also has `close()`, which teardown
calls before Ray kills it. An actor the launch keeps for the run's next stage takes that stage's
constructor arguments in its running process (`restage`): the process, its imports and its process
groups stay; what one stage's setup built is dropped, unless the role keeps it on purpose."""

import gc
import importlib
import logging
import os
import resource
import sys
from pathlib import Path
from typing import Any

from ..utils import device


class Role:
    """Base of the role actors: explorer, rollout engine, trainer rank, buffer."""

    WARM: tuple[str, ...] = ()  # modules its setup imports: the launch has them imported as the actor starts

    def __init__(
        self, *, name: str, role: str, visible_devices_env: str | None = None, log_dir: str | None = None
    ) -> None:
        self.name, self.role, self.visible_devices_env = name, role, visible_devices_env
        self.log = _logger(name, log_dir)

    def warm(self) -> None:
        """Import the modules setup needs now, while the stage sets up the other roles (verl alone takes ~9 s)."""
        for module in self.WARM:
            importlib.import_module(module)

    def restage(self, **kwargs: Any) -> bool:
        """Become this role in the run's next stage (the same constructor arguments a new actor would get); False
        when this process cannot, and the launch starts a new actor instead."""
        self.release()
        self.__dict__.clear()  # nothing a stage's setup built reaches the next stage unless a role keeps it
        self.__init__(**kwargs)
        gc.collect()
        device.empty_cache()  # the dropped models' cached blocks go back to the device for the next stage's
        return True

    def release(self) -> None:
        """Let go of what this stage's setup opened (pools, files) before `restage` drops it."""

    def report(self) -> dict:
        """Node, devices Ray assigned, and the device decision this process received."""
        import ray

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
        return peak_rss_mb()


def peak_rss_mb() -> float:
    """Peak resident memory of the calling process, in MiB: Linux's VmHWM where there is one. ru_maxrss keeps, across
    exec, the peak of the process that started this one (a driver started by a 600 MiB process reports 600)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:  # no procfs (macOS)
        pass
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
