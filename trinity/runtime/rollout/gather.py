"""One engine's generate requests from the explorer's workflow threads, sent to it as one call.

Each workflow runs in a thread of its own and asks for completions one request at a time. Sent as they come, a
step's requests would be one Ray call each and reach the engine in as many batches as their timing makes. The
gatherer holds a request until every workflow that runs on the engine now is waiting for one (or `MAX_WAIT_S`
passed), then sends them all in one `generate_many` call, which the engine generates together. A workflow counts from
its submission (so the first to start does not go alone), up to the `slots` that run at once.
"""

import threading
from dataclasses import dataclass, field
from typing import Any

from .samples import Sample, Sampling

MAX_WAIT_S = 0.05  # a workflow busy elsewhere (a slow reward, a tool) holds the others back at most this long


Request = tuple[list[int], int, Sampling]  # prompt ids, samples, sampling


@dataclass
class _Waiting:
    """One workflow's requests (several when it plays several episodes in step), answered together."""

    requests: list[Request]
    done: threading.Event = field(default_factory=threading.Event)
    results: list[tuple[int, list[Sample]]] = field(default_factory=list)
    error: BaseException | None = None


class Gatherer:
    """Gathers one engine's requests from up to `slots` workflows at once; `calls` counts the Ray calls it made."""

    def __init__(self, engine: Any, slots: int) -> None:
        self.engine, self.slots = engine, slots
        self.calls = 0
        self._unfinished = 0  # workflows submitted for this engine that have not ended
        self._waiting: list[_Waiting] = []
        self._lock = threading.Lock()

    def expect(self) -> None:
        """A workflow was submitted for this engine (before it starts: the first to start must not go alone)."""
        with self._lock:
            self._unfinished += 1

    def leave(self) -> None:
        """A workflow on this engine ended: the others may now all be waiting."""
        with self._lock:
            self._unfinished -= 1
            batch = self._take(ready_only=True)
        self._send(batch)

    def generate(self, prompt_ids: list[int], n: int, sampling: Sampling) -> tuple[int, list[Sample]]:
        """(weight version, `n` samples), generated with the other workflows' requests."""
        return self.generate_each([(prompt_ids, n, sampling)])[0]

    def generate_each(self, requests: list[Request]) -> list[tuple[int, list[Sample]]]:
        """(weight version, samples) of each request, all of them in the same call as the other workflows'."""
        mine = _Waiting(list(requests))
        with self._lock:
            self._waiting.append(mine)
            batch = self._take(ready_only=True)
        self._send(batch)
        while not mine.done.wait(MAX_WAIT_S):
            with self._lock:
                batch = self._take(ready_only=False)
            self._send(batch)
        if mine.error is not None:
            raise mine.error
        return mine.results

    def _take(self, ready_only: bool) -> list[_Waiting]:
        """The waiting requests, once every running workflow waits (or at once, not `ready_only`); under the lock."""
        if not self._waiting or (ready_only and len(self._waiting) < min(self._unfinished, self.slots)):
            return []
        batch, self._waiting = self._waiting, []
        self.calls += 1
        return batch

    def _send(self, batch: list[_Waiting]) -> None:
        if not batch:
            return
        import ray

        try:
            results = ray.get(self.engine.generate_many.remote([r for w in batch for r in w.requests]))
        except BaseException as exc:  # every waiting workflow gets the engine's error
            for waiting in batch:
                waiting.error = exc
                waiting.done.set()
            return
        start = 0
        for waiting in batch:
            waiting.results = results[start : start + len(waiting.requests)]
            start += len(waiting.requests)
            waiting.done.set()
