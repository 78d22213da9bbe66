"""Who has a vLLM engine now, and which of its device memory is awake.

Requests run together; a weight update runs alone: it waits for the requests in flight and holds new ones back until
it ends, so every request sees one weight version.

Where the trainer takes turns with the engine on its devices (colocate), the engine sleeps while the trainer
updates; its weights and its KV cache wake apart (vLLM's `wake_up(tags)`): a weight sync wakes the weights alone, so
the KV cache stays asleep while the trainer still holds its state and the sync's buffers, and generating wakes the
rest (verl 0.9.1 does the same: weights, sync, then kv_cache, verl/workers/engine_workers.py). Sleep level 1 keeps a
copy of the weights in the worker's pinned host memory and copies it back at the wake; level 2 keeps none, for a sync
that refills every weight before the engine generates (vLLM >= 0.8.5; verl/third_party/vllm/__init__.py). An engine
whose weights a level-2 sleep discarded refuses to generate until a sync has refilled them.
"""

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from .base import MEMORY

DISCARDS = 2  # the sleep level from which vLLM keeps no copy of the weights


class Turns:
    """Requests beside each other, an update alone; and what of the engine's memory sleeps."""

    def __init__(self) -> None:
        self._turn = asyncio.Condition()
        self._inflight, self._updating = 0, False
        self.asleep: set[str] = set()  # what of the device memory sleeps now
        self.discarded = False  # the weights slept at a level that keeps no copy, and no sync has refilled them

    @asynccontextmanager
    async def request(self) -> AsyncIterator[None]:
        async with self._turn:
            await self._turn.wait_for(lambda: not self._updating)
            self._inflight += 1
        try:
            yield
        finally:
            async with self._turn:
                self._inflight -= 1
                self._turn.notify_all()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Wait for the requests in flight; new ones wait until this block ends."""
        async with self._turn:
            await self._turn.wait_for(lambda: not self._updating)
            self._updating = True
            await self._turn.wait_for(lambda: self._inflight == 0)
        try:
            yield
        finally:
            async with self._turn:
                self._updating = False
                self._turn.notify_all()

    def partly_asleep(self) -> bool:
        """Some of the memory sleeps and some is awake (a sync woke the weights alone)."""
        return bool(self.asleep) and self.asleep != set(MEMORY)

    def slept(self, level: int) -> None:
        """The engine slept at `level`: all its memory."""
        self.asleep, self.discarded = set(MEMORY), level >= DISCARDS

    def to_wake(self, tags: Iterable[str] | None) -> list[str]:
        """What of `tags` (None: all of it) sleeps now, in vLLM's order."""
        wanted = set(MEMORY if tags is None else tags)
        return [tag for tag in MEMORY if tag in wanted and tag in self.asleep]

    def refuse_stale(self, name: str) -> None:
        """Raise where the engine would generate from weights a sleep discarded."""
        if self.discarded:
            raise RuntimeError(
                f"{name} slept at level {DISCARDS} (its weights discarded, for a sync to refill) and was asked to "
                "generate before a sync gave it every weight"
            )
