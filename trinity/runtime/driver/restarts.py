"""The run's restart budget (fault_tolerance: max_restarts within restart_window_s): every restart of a failed role,
whichever kind, is asked for here, recorded for the events, metrics and summary, and refused once the budget is
spent, so the failure then ends the run with its cause."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...config.schema import RunConfig


@dataclass(frozen=True)
class Restart:
    """One restart: the role that failed, why (the failure's first line), the stage step it happened at, and when
    (seconds since the run's budget started)."""

    role: str
    cause: str
    step: int
    at_s: float


@dataclass
class RestartBudget:
    """At most `most` restarts within any `window_s` seconds (fault_tolerance.max_restarts, restart_window_s)."""

    most: int
    window_s: float
    clock: Callable[[], float] = time.monotonic
    restarts: list[Restart] = field(default_factory=list)  # every restart granted, in order
    _start: float = field(init=False)

    def __post_init__(self) -> None:
        self._start = self.clock()

    def grant(self, role: str, cause: str, step: int) -> Restart | None:
        """A restart of `role`, recorded, if the budget has one left; None once `most` restarts fall within the
        window (the caller then ends the run with `cause`)."""
        if self.recent() >= self.most:
            return None
        restart = Restart(role, cause, step, self.clock() - self._start)
        self.restarts.append(restart)
        return restart

    def take_back(self, granted: list[Restart]) -> None:
        """Forget restarts granted for a replacement that did not happen (a stage's restart, if any, asks its own)."""
        self.restarts = [r for r in self.restarts if all(r is not g for g in granted)]

    def spent(self) -> str:
        """Why the budget refuses: how many restarts in how long."""
        return f"{self.most} restarts within fault_tolerance.restart_window_s={self.window_s:g} s already"

    def recent(self) -> int:
        """Restarts granted within the window up to now (the last one granted included): "restart k of most"."""
        now = self.clock() - self._start
        return sum(now - r.at_s < self.window_s for r in self.restarts)


def restart_budget(config: "RunConfig") -> RestartBudget:
    """The run's one budget, from its fault_tolerance section: made once per run (driver/run.py) and shared by every
    kind of restart, so that engine replacements and stage restarts count together."""
    tolerance = config.fault_tolerance
    return RestartBudget(tolerance.max_restarts, tolerance.restart_window_s)
