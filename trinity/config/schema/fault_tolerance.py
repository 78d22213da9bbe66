"""`fault_tolerance:` section (trinity's own): how many times a run brings a failed role back before the failure
ends it (trinity.runtime.driver.restarts)."""

from pydantic import Field, NonNegativeInt, PositiveFloat

from ._base import Section


class FaultToleranceConfig(Section):
    max_restarts: NonNegativeInt = Field(
        3,
        description="Restarts of failed roles (a rollout engine or the explorer replaced, a stage resumed from its "
        "last checkpoint after a trainer rank or the buffer died) allowed within restart_window_s; the failure after "
        "them ends the run with its cause. 0: the first failure ends the run.",
    )
    restart_window_s: PositiveFloat = Field(
        3600.0, description="Seconds over which max_restarts counts: restarts longer ago no longer count."
    )
