"""Colocate: the trainer and the engines take turns on the same devices. The engines sleep while the trainer steps;
before they wake, the trainer hands its allocator's cached blocks back to the device.

A weight sync wakes the engines' weights alone (their KV cache stays asleep while the trainer still holds its state
and the sync's buffers), and the rest wakes once the sync is done (rollout/vllm_turns.py). Where a sync follows a
train step before the engines generate again and refills every weight (no adapter-only sync), the engines sleep
through the step at the platform's deepest level (`Platform.rollout_sleep_level`: vLLM's level 2 keeps no copy of the
weights in host memory, which the wake would copy back only for the sync to overwrite); else at level 1.
"""

import time
from typing import Any, Protocol

from ...config.modes import Mode
from ...config.schema import RunConfig
from ...launch.roles import ROLLOUT, TRAINER
from ...platforms import get_platform
from ..rollout.base import WEIGHTS
from ..weights import lora

SYNC = "sync"  # the holder while a sync runs: the engines' weights awake, their KV cache asleep
KEEP_WEIGHTS = 1  # the sleep level that keeps the weights (in host memory)


class Sharing(Protocol):
    """What a handoff uses of its stage (stage.py's Stage, which builds the handoff): its config and mode, its engines
    and trainer ranks, its watched calls and its metrics records."""

    config: RunConfig
    mode: Mode
    engines: list
    ranks: list

    def wait(self, refs: list, timeout_s: float | None = None) -> list: ...
    def record(self, role: str, step: int, **values: Any) -> None: ...


class DeviceHandoff:
    """Who holds a stage's shared devices now, and the handoffs between them (nothing when its mode shares none)."""

    def __init__(self, stage: Sharing):
        self.stage = stage
        self.holder = ROLLOUT  # the engines start awake: they size their memory as they start

    def give(self, holder: str, step: int, sync_follows: bool = False) -> None:
        """Give the devices to role `holder` for stage step `step` (the trainer's: `sync_follows` says whether a sync
        refills the engines before they generate again); each handoff is a metrics record."""
        stage = self.stage
        if not stage.mode.shares_devices or self.holder == holder:
            return
        started = time.perf_counter()
        wake = holder == ROLLOUT
        kept = self._hand_back() if wake else {}
        calls = [e.wake_up.remote() if wake else e.sleep.remote(self.sleep_level(sync_follows)) for e in stage.engines]
        self._record(holder, step, stage.wait(calls), started, kept)

    def to_sync(self, step: int) -> None:
        """Before a sync after stage step `step`: the engines' weights wake, and only they."""
        stage = self.stage
        if not stage.mode.shares_devices or self.holder != TRAINER:  # the engines sleep only while the trainer holds
            return
        started = time.perf_counter()
        kept = self._hand_back()
        self._record(SYNC, step, stage.wait([e.wake_up.remote([WEIGHTS]) for e in stage.engines]), started, kept)

    def sleep_level(self, sync_follows: bool) -> int:
        """The level the engines sleep at through a train step: the platform's deepest where a sync refills every
        weight before they generate again, else one that keeps them."""
        config = self.stage.config
        if not sync_follows or lora.moves_adapter(config):  # an adapter's sync leaves the base weights as they are
            return KEEP_WEIGHTS
        return get_platform(config.hardware.device_type).rollout_sleep_level

    def _hand_back(self) -> dict:
        """The trainer's cached blocks go back to the device before the engines map theirs again; what it still
        reserves."""
        reserved = self.stage.wait([r.hand_back_device_memory.remote() for r in self.stage.ranks])
        return {"trainer_reserved_mib": max(reserved, default=0.0)}

    def _record(self, holder: str, step: int, asleep: list, started: float, kept: dict) -> None:
        self.holder = holder
        seconds = time.perf_counter() - started
        self.stage.record("devices", step, holder=holder, engines_asleep=sum(asleep), seconds=seconds, **kept)
