"""`data_processor:` section: operators applied to each explore step's experiences before they reach the buffer
(Trinity-RFT's experience pipeline). config/operators.py lists the operators that run and those refused."""

from typing import Any

from pydantic import Field

from ._base import Section


class OperatorConfig(Section):
    name: str = Field("", description="The operator (config/operators.py lists them).")
    args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the operator.")


class ExperiencePipelineConfig(Section):
    operators: list[OperatorConfig] = Field(
        default_factory=list, description="Applied in order to each explore step's experiences."
    )


class DataProcessorConfig(Section):
    experience_pipeline: ExperiencePipelineConfig = Field(
        default_factory=ExperiencePipelineConfig, description="What happens to experiences before the buffer."
    )
