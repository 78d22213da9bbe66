"""`monitor:` section: where metrics go."""

from typing import Any, Literal

from pydantic import Field

from ._base import Section


class MonitorConfig(Section):
    monitor_type: Literal["tensorboard", "wandb", "mlflow", "swanlab"] = Field(
        "tensorboard", description="Metrics sink."
    )
    monitor_args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the sink.")
    enable_ray_timeline: bool = Field(False, description="Dump a Ray timeline at the end.")
    detailed_stats: bool = Field(
        False,
        description="Evaluation lines give the max, min and std over an eval taskset's tasks beside each mean.",
    )
