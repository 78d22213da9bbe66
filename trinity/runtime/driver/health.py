"""Health checks of the rollout engines while a stage runs: a hung engine (a wedged device call, a stopped process)
answers nothing and fails nothing, so the calls waiting on it would wait forever. Every
fault_tolerance.engine_health_interval_s the driver asks each engine its weight version (answered by its event loop,
also while it generates or loads weights); one that leaves the question unanswered for engine_health_timeout_s is
killed, and the check raises a RoleFailed naming it hung, which the stage handles as an engine's death (replaced
where the restart budget allows: restart.py). The watcher polls it between its waits (watcher.RayWatcher.on_poll)."""

import time
from collections.abc import Callable
from typing import Any

from .blame import Failure
from .watcher import RoleFailed


class EngineHealth:
    """Checks the engines of `engines()` (name -> handle, read at each check: a replaced engine is checked as it
    comes) every `interval_s`, each given `timeout_s` to answer."""

    def __init__(
        self, engines: Callable[[], dict[str, Any]], interval_s: float, timeout_s: float, clock=time.monotonic
    ):
        self.engines, self.interval_s, self.timeout_s, self.clock = engines, interval_s, timeout_s, clock
        self.asked: dict[str, tuple[Any, Any, float]] = {}  # name -> (handle, its question's ref, when asked)
        self.paused = False  # while engines are replaced: a new one may be slow to answer as it starts, not hung
        self.next_at = clock() + interval_s

    def poll(self) -> None:
        """Ask when it is time; raise RoleFailed naming an engine that left its question unanswered too long (it is
        killed first, so every call waiting on it fails and frees its caller)."""
        import ray

        now = self.clock()
        if self.paused:
            return
        for name, (handle, ref, asked_at) in list(self.asked.items()):
            ready, _ = ray.wait([ref], timeout=0)
            if ready:  # answered, or failed: a dead engine's death is reported by the calls on it
                del self.asked[name]
            elif now - asked_at >= self.timeout_s:
                del self.asked[name]
                ray.kill(handle, no_restart=True)
                raise RoleFailed.of([Failure(name, True, self._hung(now - asked_at), time.time())])
        if not self.asked and now >= self.next_at:
            self.asked = {
                name: (engine, engine.weight_version.remote(), now) for name, engine in self.engines().items()
            }
            self.next_at = now + self.interval_s

    def pause(self) -> None:
        """No checks while engines are replaced (`resume` starts them again); the questions out are dropped."""
        self.asked, self.paused = {}, True

    def resume(self) -> None:
        """Check again, the first time after a full interval."""
        self.paused, self.next_at = False, self.clock() + self.interval_s

    def _hung(self, waited_s: float) -> str:
        return (
            f"killed, hung: no answer to a health check in {waited_s:.0f} s (fault_tolerance.engine_health_timeout_s="
            f"{self.timeout_s:g})"
        )
