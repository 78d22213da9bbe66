"""`fault_tolerance:` section (trinity's own): how many times a run brings a failed role back before the failure
ends it (trinity.runtime.driver.restarts), and how a hung rollout engine is found (trinity.runtime.driver.health)."""

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
    engine_health_interval_s: PositiveFloat = Field(
        30.0,
        description="Seconds between health checks of the rollout engines while a stage runs: the driver asks each "
        "engine a trivial question (its weight version), which a live engine answers at once, even mid-generation.",
    )
    engine_health_timeout_s: PositiveFloat = Field(
        120.0,
        description="Seconds an engine may leave a health check unanswered: past them it counts as hung, is killed and "
        "replaced as a dead one is (a restart of the budget). A hung engine is found within engine_health_interval_s "
        "+ engine_health_timeout_s.",
    )
