"""`env:` section: environment variables each role's processes get."""

from pydantic import Field

from ._base import Section

EnvVars = dict[str, str]


class EnvConfig(Section):
    common: EnvVars = Field(default_factory=dict, description="Variables of every role.")
    trainer: EnvVars = Field(default_factory=dict, description="Variables of the trainer processes.")
    rollout: EnvVars = Field(default_factory=dict, description="Variables of the rollout engines.")
