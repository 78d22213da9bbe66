"""`cluster:` section: nodes, devices and the derived device split."""

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt

from ._base import Section


class ClusterConfig(Section):
    ray_address: str = Field(
        "auto",
        description="Ray cluster to join; 'auto' finds a running one or starts a local one; 'local' always starts a "
        "local one.",
    )
    node_num: NonNegativeInt = Field(
        1, description="Nodes used by this run; 0 (Trinity-RFT's 'ask Ray') is 1: the plan is made before Ray starts."
    )
    gpu_per_node: NonNegativeInt | None = Field(
        None,
        description="Accelerators used per node (GPUs or NPUs); defaults to the profile's devices_per_node, or the "
        "devices a node offers (node_devices) where fewer; 0 (Trinity-RFT's 'ask Ray') is that default too.",
    )
    node_devices: PositiveInt | None = Field(
        None,
        description="Devices one node offers: what the live Ray cluster's nodes have (on the run path), or this "
        "machine's with hardware=auto; a gpu_per_node above it is lowered to it. None: not known yet (a named profile "
        "before Ray is asked). Set it to plan for nodes of that size without a cluster.",
    )
    train_stage_devices: Literal["all", "trainer"] | None = Field(
        None,
        description="Devices of a train-only stage in a run whose other stages explore: all of them (Trinity-RFT's), "
        "or the trainer's share in those stages, so the next stage's engines start beside it and the stage "
        "transition keeps every actor. None: the profile's (facts.train_stage_devices).",
    )
    total_gpu_num: NonNegativeInt | None = Field(None, description="Derived: node_num x gpu_per_node.")
    rollout_gpu_num: NonNegativeInt | None = Field(None, description="Derived: devices of the rollout engines.")
    explorer_gpu_num: NonNegativeInt | None = Field(
        None, description="Derived: devices of the explorer's engines (the rollout engines' and the auxiliary models')."
    )
    trainer_gpu_num: NonNegativeInt | None = Field(None, description="Derived: devices left to the trainer.")
    trainer_node_num: NonNegativeInt | None = Field(None, description="Derived: nodes the trainer spans.")
    trainer_gpu_num_per_node: NonNegativeInt | None = Field(None, description="Derived: trainer devices per node.")
