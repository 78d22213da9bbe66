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
    save_input: bool = Field(
        False,
        description="Keep each explore step's experiences as the explorer made them, before the operators, at "
        "input_save_path (Trinity-RFT's default is true; trinity's buffer already holds what the operators keep).",
    )
    input_save_path: str | None = Field(
        None,
        description="Where save_input keeps them: a .jsonl or .json file (JSON lines) or a sqlite:/// URL, relative "
        "to the run directory; null: sqlite:///explorer_output.db there.",
    )


class DataProcessorConfig(Section):
    experience_pipeline: ExperiencePipelineConfig = Field(
        default_factory=ExperiencePipelineConfig, description="What happens to experiences before the buffer."
    )
