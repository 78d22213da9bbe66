"""Base class shared by every config section."""

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A config section: unknown keys are errors and resolved values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=False)
