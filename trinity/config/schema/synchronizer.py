"""`synchronizer:` section: how trained weights reach the rollout engines."""

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from ..sync_methods import ALIASES, CHANNELS, METHODS
from ._base import Section

# the table's methods (config/sync_methods.py) and the aliases a user may write
SyncMethod = Literal[tuple(METHODS) + tuple(ALIASES)]


class SynchronizerConfig(Section):
    sync_method: SyncMethod = Field(
        "online",
        description="nccl/hccl/gloo (collective), checkpoint, memory; 'online' picks the hardware's collective.",
    )
    sync_style: Literal["fixed", "trainer_driven", "explorer_driven", "fully_async"] = Field(
        "fixed", description="Who decides when weights are synchronised."
    )
    sync_interval: PositiveInt = Field(1, description="Train steps between synchronisations.")
    explorer_sync_interval: PositiveInt | None = Field(
        None,
        description="Explore steps between the explorer's looks for new weights (after sync_offset); "
        "None: sync_interval.",
    )
    trainer_sync_interval: PositiveInt | None = Field(
        None, description="Train steps between the trainer's offers of its weights; None: sync_interval."
    )
    sync_offset: NonNegativeInt = Field(0, description="Explore steps the explorer may run ahead.")
    sync_timeout: PositiveInt = Field(3600, description="Seconds one synchronisation may take.")
    lora_sync: Literal["adapter", "merged"] = Field(
        "adapter",
        description="LoRA runs: what a sync moves. adapter: the adapter's matrices, which the engines apply "
        "(megabytes); merged: base + adapter as full weights (the engines run a plain model).",
    )
    sync_bucket_mib: PositiveInt = Field(
        256,
        description="Largest piece of weights a sync moves at once, in MiB: one broadcast of a collective, one piece "
        "of a memory sync. Bounds what a sync takes beside the model in each process (a tensor larger than it moves "
        "alone).",
    )
    group_name: str = Field(
        "rollout_weight_sync",
        min_length=1,
        description="Name of the weight-sync process group (each stage's is <group_name>-<host>-<port>).",
    )
    wait_for_checkpoint: bool = Field(
        False, description="Trinity-RFT reads it nowhere (a TODO there); accepted, and it has no effect here either."
    )
    weight_sync_world_size: PositiveInt | None = Field(
        None, description="Derived: rollout devices + 1 (trainer rank 0) for collective methods."
    )
    sync_channel: Literal[CHANNELS] | None = Field(
        None,
        description="Derived: how the weights travel: process_group (collective), files (checkpoint), object_store "
        "or device_ipc (memory: device IPC where trainer and engines share devices that have it).",
    )

    @property
    def bucket_bytes(self) -> int:
        """sync_bucket_mib in bytes: the bound on one piece of a sync."""
        return self.sync_bucket_mib * 2**20
