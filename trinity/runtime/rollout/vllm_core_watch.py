"""A vLLM engine whose engine core died ends its own actor's process.

vLLM runs its scheduler and model in a process of its own (EngineCore, with a TP engine's workers under it). When that
process dies (an OOM kill, a device fault, a crash) while the engine's actor lives, the actor still answers: health
checks (driver/health.py ask its weight version) pass, a weight sync waits on the dead workers up to
synchronizer.sync_timeout, and the run hangs. vLLM marks its client dead as soon as it sees the core process end
(AsyncLLM.errored), so the actor watches that mark and, once it is set, ends itself saying why (roles/sentinel.py
end_itself; the driver's cause line names it): a dead actor is what the driver replaces (driver/replace.py) or names
as the failure's cause. A watch reads whatever AsyncLLM the engine holds at each read, so it goes on across a kept
engine's next stage.
"""

import asyncio
from typing import Any

from ..roles import sentinel

WATCH_S = 0.5  # how often the mark is read: the driver learns of the death about this long after vLLM does


async def watch(engine: Any) -> None:
    """Exit this process once `engine.llm` (vLLM's AsyncLLM) says its core died; return when the engine closes it."""
    while (llm := engine.llm) is not None and not llm.errored:
        await asyncio.sleep(WATCH_S)
    if llm is not None:  # died under it (close() drops it before the next read)
        sentinel.end_itself(engine.log, f"vLLM's engine core of {engine.name} died (vLLM's own lines are in this log)")
