"""The run config: the whole tree a Trinity run reads."""

from typing import Any, Literal

from pydantic import Field

from ..modes import MODES
from ._base import Section
from .algorithm import AlgorithmConfig
from .buffer import BufferConfig
from .cluster import ClusterConfig
from .data_processor import DataProcessorConfig
from .env import EnvConfig
from .explorer import ExplorerConfig
from .fault_tolerance import FaultToleranceConfig
from .hardware import HardwareSection
from .log import LogConfig
from .model import ModelConfig
from .monitor import MonitorConfig
from .synchronizer import SynchronizerConfig
from .trainer import TrainerConfig

Mode = Literal[tuple(MODES)]  # the modes table (config/modes.py) lists them


class StageConfig(Section):
    """One stage: its sections deep-merge into the root config for the stage's duration."""

    stage_name: str = Field(..., min_length=1, description="Name shown in logs and checkpoints.")
    mode: Mode | None = Field(None, description="Mode of this stage; defaults to the root mode.")
    algorithm: dict[str, Any] | None = Field(None, description="Merged into algorithm.")
    model: dict[str, Any] | None = Field(None, description="Merged into model.")
    buffer: dict[str, Any] | None = Field(None, description="Merged into buffer.")
    explorer: dict[str, Any] | None = Field(None, description="Merged into explorer.")
    synchronizer: dict[str, Any] | None = Field(None, description="Merged into synchronizer.")
    trainer: dict[str, Any] | None = Field(None, description="Merged into trainer.")
    monitor: dict[str, Any] | None = Field(None, description="Merged into monitor.")
    data_processor: dict[str, Any] | None = Field(None, description="Merged into data_processor.")


STAGE_SECTIONS = (
    "mode",
    "algorithm",
    "model",
    "buffer",
    "explorer",
    "synchronizer",
    "trainer",
    "monitor",
    "data_processor",
)


class RunConfig(Section):
    mode: Mode = Field("both", description="both: explore and train; explore/train alone; bench, serve, colocate.")
    project: str = Field("Trinity-RFT", description="Project name in the monitor.")
    group: str = Field("", description="Group name in the monitor.")
    name: str = Field("rft", description="Run name.")
    checkpoint_root_dir: str = Field("./checkpoints", description="Checkpoints go to <root>/<project>/<name>.")
    continue_from_checkpoint: bool = Field(True, description="Resume from the newest checkpoint of this run.")
    ray_namespace: str | None = Field(None, description="Ray namespace; defaults to <project>/<name>.")
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig, description="RL algorithm.")
    model: ModelConfig = Field(..., description="Policy model.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="Nodes and devices.")
    buffer: BufferConfig = Field(default_factory=BufferConfig, description="Data in and out.")
    explorer: ExplorerConfig = Field(default_factory=ExplorerConfig, description="Rollout.")
    synchronizer: SynchronizerConfig = Field(default_factory=SynchronizerConfig, description="Weight sync.")
    trainer: TrainerConfig = Field(default_factory=TrainerConfig, description="Training.")
    monitor: MonitorConfig = Field(default_factory=MonitorConfig, description="Metrics.")
    data_processor: DataProcessorConfig = Field(
        default_factory=DataProcessorConfig, description="Operators on the experiences before the buffer."
    )
    log: LogConfig = Field(default_factory=LogConfig, description="The roles' log files.")
    fault_tolerance: FaultToleranceConfig = Field(
        default_factory=FaultToleranceConfig, description="Failed roles brought back before a failure ends the run."
    )
    ignore_validator_suggestions: bool = Field(
        False,
        description="Report a role that does not fit its devices' memory as a warning, not an error (Trinity-RFT's "
        "switch that turns its GPU memory check off).",
    )
    stages: list[StageConfig] = Field(
        default_factory=list, description="Stages run in order; empty runs the root config once."
    )
    hardware: HardwareSection | None = Field(None, description="Set from the hardware profile; not written by users.")
    env: EnvConfig = Field(default_factory=EnvConfig, description="Environment by role: profile, derived, then yours.")
