"""Colocate: the trainer and the engines take turns on the same devices. The engines sleep while the trainer steps;
before they wake, the trainer hands its allocator's cached blocks back to the device."""

import time
from typing import TYPE_CHECKING

from ...launch.roles import ROLLOUT

if TYPE_CHECKING:
    from .stage import Stage


class DeviceHandoff:
    """Who holds a stage's shared devices now, and the handoffs between them (nothing when its mode shares none)."""

    def __init__(self, stage: "Stage"):
        self.stage = stage
        self.holder = ROLLOUT  # the engines start awake: they size their memory as they start

    def give(self, holder: str, step: int) -> None:
        """Give the devices to role `holder` for stage step `step`; each handoff is a metrics record."""
        stage = self.stage
        if not stage.mode.shares_devices or self.holder == holder:
            return
        started = time.perf_counter()
        wake = holder == ROLLOUT
        kept = {}
        if wake:  # the trainer's cached blocks go back to the device before the engines map theirs again
            reserved = stage.wait([r.hand_back_device_memory.remote() for r in stage.ranks])
            kept = {"trainer_reserved_mib": max(reserved, default=0.0)}
        asleep = stage.wait([e.wake_up.remote() if wake else e.sleep.remote() for e in stage.engines])
        self.holder = holder
        seconds = time.perf_counter() - started
        stage.metrics.write(
            "devices",
            stage.start.offset + step,
            stage.name,
            holder=holder,
            engines_asleep=sum(asleep),
            seconds=seconds,
            **kept,
        )
