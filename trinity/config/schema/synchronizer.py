"""`synchronizer:` section: how trained weights reach the rollout engines."""

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from ._base import Section

# Collective methods move weights over a process group; the name is the torch.distributed backend.
COLLECTIVE_METHODS = ("nccl", "hccl", "gloo")
SyncMethod = Literal["nccl", "hccl", "gloo", "checkpoint", "memory", "online", "offline"]
SYNC_ALIASES = {"online": "a collective backend chosen by the hardware", "offline": "checkpoint"}


class SynchronizerConfig(Section):
    sync_method: SyncMethod = Field(
        "online",
        description="nccl/hccl/gloo (collective), checkpoint, memory; 'online' picks the hardware's collective.",
    )
    sync_style: Literal["fixed", "trainer_driven", "explorer_driven", "fully_async"] = Field(
        "fixed", description="Who decides when weights are synchronised."
    )
    sync_interval: PositiveInt = Field(1, description="Train steps between synchronisations.")
    sync_offset: NonNegativeInt = Field(0, description="Explore steps the explorer may run ahead.")
    sync_timeout: PositiveInt = Field(3600, description="Seconds one synchronisation may take.")
    lora_sync: Literal["adapter", "merged"] = Field(
        "adapter",
        description="LoRA runs: what a sync moves. adapter: the adapter's matrices, which the engines apply "
        "(megabytes); merged: base + adapter as full weights (the engines run a plain model).",
    )
    weight_sync_world_size: PositiveInt | None = Field(
        None, description="Derived: rollout devices + 1 (trainer rank 0) for collective methods."
    )
