"""An engine's actor ends its process once vLLM marks its engine core dead, and only then (vllm_core_watch.py): on a
stand-in for vLLM's AsyncLLM (its `errored` mark), with os._exit recorded instead of taken. The real core killed under
a real vLLM: tests/cli/test_run_lora.py."""

import asyncio
import logging
import os
from types import SimpleNamespace

from trinity.runtime.roles import sentinel
from trinity.runtime.rollout import vllm_core_watch


def engine(llm):
    return SimpleNamespace(llm=llm, name="rollout.engine0", log=logging.getLogger("test_vllm_core_watch"))


def run_watch(monkeypatch, eng, then) -> list[int]:
    """Watch `eng` while `then(eng)` runs after a few of the watch's reads; the exit codes it took."""
    exits: list[int] = []
    monkeypatch.setattr(vllm_core_watch, "WATCH_S", 0.01)
    monkeypatch.setattr(sentinel.os, "_exit", exits.append)

    async def main():
        watching = asyncio.create_task(vllm_core_watch.watch(eng))
        await asyncio.sleep(0.05)
        assert not watching.done()  # a live core is watched on
        then(eng)
        await asyncio.wait_for(watching, 1)

    asyncio.run(main())
    return exits


def test_a_core_marked_dead_ends_the_process_with_exit_code_1_saying_why(monkeypatch, caplog):
    exits = run_watch(monkeypatch, engine(SimpleNamespace(errored=False)), lambda e: setattr(e.llm, "errored", True))
    assert exits == [1]
    why = "vLLM's engine core of rollout.engine0 died (vLLM's own lines are in this log)"
    assert sentinel.ends_itself(caplog.text.splitlines(), os.getpid()) == why  # the driver's cause names it


def test_an_engine_closed_ends_the_watch_and_not_the_process(monkeypatch):
    def close(eng):  # close(): vLLM shut down (its mark set too), then dropped
        eng.llm.errored = True
        eng.llm = None

    assert run_watch(monkeypatch, engine(SimpleNamespace(errored=False)), close) == []
