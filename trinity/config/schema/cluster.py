"""`cluster:` section: nodes, devices and the derived device split."""

from pydantic import Field, NonNegativeInt, PositiveInt

from ._base import Section


class ClusterConfig(Section):
    ray_address: str = Field(
        "auto",
        description="Ray cluster to join; 'auto' finds a running one or starts a local one; 'local' always starts a "
        "local one.",
    )
    node_num: PositiveInt = Field(1, description="Nodes used by this run.")
    gpu_per_node: PositiveInt | None = Field(
        None, description="Accelerators used per node (GPUs or NPUs); defaults to the profile's devices_per_node."
    )
    total_gpu_num: NonNegativeInt | None = Field(None, description="Derived: node_num x gpu_per_node.")
    rollout_gpu_num: NonNegativeInt | None = Field(None, description="Derived: devices of the rollout engines.")
    explorer_gpu_num: NonNegativeInt | None = Field(
        None, description="Derived: devices of the explorer's engines (auxiliary models are not run yet)."
    )
    trainer_gpu_num: NonNegativeInt | None = Field(None, description="Derived: devices left to the trainer.")
    trainer_node_num: NonNegativeInt | None = Field(None, description="Derived: nodes the trainer spans.")
    trainer_gpu_num_per_node: NonNegativeInt | None = Field(None, description="Derived: trainer devices per node.")
