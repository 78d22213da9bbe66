"""The run modes, one table: what each mode runs, what it locks and which stage loop drives it.

Every consumer reads an entry here (the derive rules, the launch plan, preflight, the run directory,
the stage loop); adding a mode is one entry plus the stage loop it names.
"""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Mode:
    """What one mode runs, as plain facts."""

    name: str
    explores: bool  # an explorer and rollout engines run: tasksets are read, engines take devices
    trains: bool  # trainer ranks run and write checkpoints
    syncs: bool  # a synchronizer moves the trainer's weights to this run's own engines
    buffers: bool  # experiences (or the SFT data set) go through the buffer actor
    shares_devices: bool  # trainer and engines take turns on the same devices (engines sleep while it steps)
    locks: tuple[str, ...]  # run-directory locks it holds: runs whose locks overlap never share a directory
    loop: str  # the stage loop that drives it (trinity/runtime/driver/loops/): both, explore, train, bench, serve
    # its steps are the run directory's saved checkpoints, each evaluated once (no explore/train steps, no interval)
    evaluates_checkpoints: bool = False
    # engines answer agents outside the run on their OpenAI endpoints (no explorer, no tasksets); rewards sent to
    # /feedback make experiences
    serves: bool = False

    @property
    def runs_engines(self) -> bool:
        """Rollout engines run and take devices."""
        return self.explores or self.serves

    @property
    def explores_steps(self) -> bool:
        """Explore steps run: workflows make experiences step by step (bench evaluates checkpoints, no step)."""
        return self.explores and not self.evaluates_checkpoints

    @property
    def splits_devices(self) -> bool:
        """Explorer and trainer run side by side on devices of their own: the trainer gets what rollout leaves."""
        return self.explores and self.trains and not self.shares_devices


_ENTRIES = (
    Mode(
        "both",
        explores=True,
        trains=True,
        syncs=True,
        buffers=True,
        shares_devices=False,
        locks=("explore", "train"),
        loop="both",
    ),
    # An explore run and a train run may share one directory: the train run publishes checkpoints, the explore run
    # loads them and writes the experiences the train run reads through the buffer's storage.
    Mode(
        "explore",
        explores=True,
        trains=False,
        syncs=False,
        buffers=True,
        shares_devices=False,
        locks=("explore",),
        loop="explore",
    ),
    Mode(
        "train",
        explores=False,
        trains=True,
        syncs=False,
        buffers=True,
        shares_devices=False,
        locks=("train",),
        loop="train",
    ),
    # evaluates the directory's checkpoints one after another: no trainer, nothing through the buffer
    Mode(
        "bench",
        explores=True,
        trains=False,
        syncs=False,
        buffers=False,
        shares_devices=False,
        locks=("bench",),
        loop="bench",
        evaluates_checkpoints=True,
    ),
    # the engines on their OpenAI endpoints for agents outside trinity; the calls they reward at /feedback go to the
    # buffer's storage for a `train` run of the same directory, whose published weights it picks up
    Mode(
        "serve",
        explores=False,
        trains=False,
        syncs=False,
        buffers=True,
        shares_devices=False,
        locks=("explore",),
        loop="serve",
        serves=True,
    ),
    # the loop of `both`, the trainer and the engines taking turns on the same devices
    Mode(
        "colocate",
        explores=True,
        trains=True,
        syncs=True,
        buffers=True,
        shares_devices=True,
        locks=("explore", "train"),
        loop="both",
    ),
)
MODES: dict[str, Mode] = {m.name: m for m in _ENTRIES}


def mode(name: str) -> Mode:
    """The entry of mode `name`; a ValueError naming the modes there are."""
    if name not in MODES:
        raise ValueError(f"unknown mode {name!r} (modes: {', '.join(MODES)})")
    return MODES[name]


def on_devices(name: str, written: bool, devices: int) -> str:
    """The mode a run of mode `name` runs in on `devices` devices: a mode that splits the devices, which nobody wrote
    (the schema's default), takes turns on a single device (an engine and a trainer rank can only share it)."""
    entry = mode(name)
    if written or not entry.splits_devices or devices != 1:
        return name
    return next(m.name for m in MODES.values() if m.loop == entry.loop and m.shares_devices)


def trains_until_drained(config: Any) -> bool:
    """A train run of the experiences another run writes, given no step count: it trains until a batch does not come
    within the experience buffer's max_read_timeout, and ends there (Trinity-RFT's trainer, whose total_steps unset
    is float('inf')); a count is then not known before the run."""
    from .algorithms.queries import needs_rollout

    run = MODES[config.mode]
    counted = config.trainer.total_steps or config.buffer.total_steps
    return run.trains and not run.explores and needs_rollout(config.algorithm.algorithm_type) and not counted
