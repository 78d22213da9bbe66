"""The weight-sync methods, one table: how each moves the trainer's weights and what it becomes in each mode.

Every consumer reads an entry here: the derive rule (`synchronizer.sync_method`, `sync_channel`, the sync world
size), the stage (whether a train-only run publishes), the synchronizer (which moves the weights) and the trainer
rank (what a memory piece is). Adding a method is one entry plus the synchronizer's mover it names.
"""

from dataclasses import dataclass

from ..platforms import PLATFORMS
from .modes import Mode

# How weights travel (synchronizer.sync_channel): a process group's broadcasts, files in the run directory, pieces
# through Ray's object store, or pieces the engines map from the trainer's device memory (device IPC handles).
PROCESS_GROUP, FILES, OBJECT_STORE, DEVICE_IPC = "process_group", "files", "object_store", "device_ipc"
CHANNELS = (PROCESS_GROUP, FILES, OBJECT_STORE, DEVICE_IPC)


@dataclass(frozen=True)
class SyncMethod:
    """One value of synchronizer.sync_method, as plain facts."""

    name: str
    collective: bool  # trainer rank 0 and every engine worker form a process group of this backend
    channel: str  # how its weights travel (memory: object_store, or device_ipc where the devices are shared)
    needs_run_with_engines: bool  # trainer and engines run in one run (a collective or memory); else files
    description: str

    def in_mode(self, mode: Mode) -> "SyncMethod":
        """What this method becomes in `mode`: a collective joins trainer and engines side by side on devices of
        their own; taking turns on the devices the weights go through memory; across two runs (explore and train),
        through checkpoint files."""
        if self.collective and not mode.splits_devices:
            return METHODS[MEMORY if mode.shares_devices else CHECKPOINT]
        if self.needs_run_with_engines and not mode.syncs:
            return METHODS[CHECKPOINT]
        return self


MEMORY, CHECKPOINT = "memory", "checkpoint"
_ENTRIES = (
    *(
        SyncMethod(
            backend,
            collective=True,
            channel=PROCESS_GROUP,
            needs_run_with_engines=True,
            description=f"trainer rank 0 broadcasts over a {backend} group of every engine worker",
        )
        for backend in dict.fromkeys(p.collective_backend for p in PLATFORMS.values())  # each platform's collective
    ),
    SyncMethod(
        CHECKPOINT,
        collective=False,
        channel=FILES,
        needs_run_with_engines=False,
        description="trainer rank 0 writes a safetensors file in the run directory; the engines read it",
    ),
    SyncMethod(
        MEMORY,
        collective=False,
        channel=OBJECT_STORE,
        needs_run_with_engines=True,
        description="the weights go in pieces of synchronizer.sync_bucket_mib through Ray's object store, or by "
        "device IPC handles where trainer and engines share devices that have them",
    ),
)
METHODS: dict[str, SyncMethod] = {m.name: m for m in _ENTRIES}
# what a user may write beside the methods themselves: online is the hardware's collective, offline is checkpoint
ALIASES = {"online": "a collective backend chosen by the hardware", "offline": CHECKPOINT}


def method(name: str) -> SyncMethod:
    """The entry of sync method `name`; a ValueError naming the methods there are."""
    if name not in METHODS:
        raise ValueError(f"unknown sync method {name!r} (methods: {', '.join(METHODS)})")
    return METHODS[name]


def channel(entry: SyncMethod, mode: Mode, device_ipc: bool) -> str:
    """How `entry`'s weights travel in `mode`: memory maps the trainer's device memory where both take turns on
    devices that share memory between processes (`device_ipc`, a platform fact)."""
    if entry.channel == OBJECT_STORE and mode.shares_devices and device_ipc:
        return DEVICE_IPC
    return entry.channel
