"""The serve proxy's engines (proxy.py): what it knows of each, which one answers next, their health checks, and the
weight waves that take a few of them out of turn at a time.

Two threads share them: the proxy's (requests, health checks) and the serve loop's (weights); every read and change
holds the one lock.
"""

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

from .openai_requests import ApiError

HEALTH_TIMEOUT_S = 10.0  # an engine that does not answer /health within this is down until it does


@dataclass
class EngineState:
    """What the proxy knows of one engine (one OpenAI endpoint)."""

    index: int
    url: str  # …/v1
    healthy: bool = False
    serving: bool = True  # False while it takes new weights
    in_flight: int = 0
    requests: int = 0
    weight_version: int | None = None
    problem: str = "not checked yet"

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")


class EngineTurns:
    """The engines at `urls` (…/v1 each), taking requests in turn while at least `min_running` of them answer."""

    def __init__(self, urls: list[str], min_running: int = 1) -> None:
        self.engines = [EngineState(i, u) for i, u in enumerate(urls)]
        self.min_running = min_running
        self.lock = threading.Lock()
        self._next = 0

    # --- health (the proxy's thread) ---------------------------------------------------------------------------

    async def check_all(self, client: Any) -> None:
        """Ask every engine's /health with `client` (an httpx.AsyncClient)."""
        await asyncio.gather(*(self._check(client, e) for e in self.engines))

    async def _check(self, client: Any, engine: EngineState) -> None:
        try:
            answer = await client.get(f"{engine.root}/health", timeout=HEALTH_TIMEOUT_S)
            if answer.status_code != 200:
                raise RuntimeError(f"/health answered {answer.status_code}")
            version = answer.json().get("weight_version")
        except Exception as exc:  # down, or answering nonsense: no requests until it answers again
            self.down(engine, f"{type(exc).__name__}: {exc}")
            return
        with self.lock:
            engine.healthy, engine.problem, engine.weight_version = True, "", version

    def down(self, engine: EngineState, problem: str) -> None:
        """`engine` gets no requests until its health check answers again."""
        with self.lock:
            engine.healthy, engine.problem = False, problem

    def answering(self) -> int:
        """How many engines answer their health check."""
        with self.lock:
            return sum(e.healthy for e in self.engines)

    # --- requests in turn (the proxy's thread) -----------------------------------------------------------------

    def pick(self, tried: set[int]) -> EngineState:
        """The next engine in turn that answers and serves (not one of `tried`), its request counted."""
        with self.lock:
            answering = [e for e in self.engines if e.healthy]
            if len(answering) < self.min_running:
                down = "; ".join(f"engine {e.index}: {e.problem}" for e in self.engines if not e.healthy)
                raise ApiError(
                    503,
                    f"{len(answering)} of {len(self.engines)} engines answer their health check, fewer than "
                    f"explorer.min_running_model_num={self.min_running} ({down}); try again shortly",
                )
            n = len(self.engines)
            for step in range(n):
                engine = self.engines[(self._next + step) % n]
                if engine.healthy and engine.serving and engine.index not in tried:
                    self._next = (engine.index + 1) % n
                    engine.in_flight += 1
                    engine.requests += 1
                    return engine
        raise ApiError(503, "no engine is free to answer: they are taking new weights or down; try again shortly")

    def done(self, engine: EngineState) -> None:
        """A request `pick` gave `engine` is answered."""
        with self.lock:
            engine.in_flight -= 1

    def table(self) -> list[dict]:
        """Each engine's state and counts (the proxy's GET /metrics)."""
        with self.lock:
            return [
                {
                    "engine": e.index,
                    "url": e.url,
                    "healthy": e.healthy,
                    "serving": e.serving,
                    "requests": e.requests,
                    "in_flight": e.in_flight,
                    "weight_version": e.weight_version,
                    "problem": e.problem,
                }
                for e in self.engines
            ]

    # --- weights, a few engines at a time (the serve loop's thread) -------------------------------------------

    def withdraw(self, pending: list[int]) -> list[int]:
        """Take engines of `pending` out of turn (they finish what they answer and get no new requests) while
        `min_running_model_num` answering engines keep serving; returns those taken ([]: none can be spared). An
        engine that does not answer is taken at once."""
        with self.lock:
            serving = [e.index for e in self.engines if e.healthy and e.serving]
            spare = len(serving) - self.min_running
            taken = [i for i in pending if not self.engines[i].healthy]
            for i in pending:
                if i in serving and spare > 0:
                    taken.append(i)
                    spare -= 1
            for i in taken:
                self.engines[i].serving = False
            return sorted(taken)

    def drained(self, taken: list[int], timeout_s: float) -> bool:
        """Wait until engines `taken` answered every request the proxy sent them (at most `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if all(self.engines[i].in_flight == 0 for i in taken):
                    return True
            time.sleep(0.05)
        return False

    def restore(self, taken: list[int], version: int) -> None:
        """Engines `taken` serve again, holding weight version `version`."""
        with self.lock:
            for i in taken:
                self.engines[i].serving, self.engines[i].weight_version = True, version
