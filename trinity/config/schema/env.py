"""`env:` section: environment variables each role's processes get."""

from typing import Annotated

from pydantic import Field, StringConstraints

from ._base import Section

ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
EnvVars = dict[Annotated[str, StringConstraints(pattern=ENV_NAME_PATTERN)], str]


class EnvConfig(Section):
    common: EnvVars = Field(default_factory=dict, description="Variables of every role.")
    trainer: EnvVars = Field(default_factory=dict, description="Variables of the trainer processes.")
    rollout: EnvVars = Field(default_factory=dict, description="Variables of the rollout engines.")
