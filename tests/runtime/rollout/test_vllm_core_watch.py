"""An engine's actor ends its process once vLLM marks its engine core dead, and only then (vllm_core_watch.py): on a
stand-in for vLLM's AsyncLLM (its `errored` mark), with os._exit recorded instead of taken. The real core killed under
a real vLLM: tests/cli/test_run_lora.py."""

import asyncio
import logging
from types import SimpleNamespace

from trinity.runtime.rollout import vllm_core_watch


def engine(llm):
    return SimpleNamespace(llm=llm, name="rollout.engine0", log=logging.getLogger("test_vllm_core_watch"))


def run_watch(monkeypatch, eng, then) -> list[int]:
    """Watch `eng` while `then(eng)` runs after a few of the watch's reads; the exit codes it took."""
    exits: list[int] = []
    monkeypatch.setattr(vllm_core_watch, "WATCH_S", 0.01)
    monkeypatch.setattr(vllm_core_watch.os, "_exit", exits.append)

    async def main():
        watching = asyncio.create_task(vllm_core_watch.watch(eng))
        await asyncio.sleep(0.05)
        assert not watching.done()  # a live core is watched on
        then(eng)
        await asyncio.wait_for(watching, 1)

    asyncio.run(main())
    return exits


def test_a_core_marked_dead_ends_the_process_with_exit_code_1(monkeypatch, caplog):
    exits = run_watch(monkeypatch, engine(SimpleNamespace(errored=False)), lambda e: setattr(e.llm, "errored", True))
    assert exits == [1]
    assert "vLLM's engine core of rollout.engine0 died" in caplog.text


def test_an_engine_closed_ends_the_watch_and_not_the_process(monkeypatch):
    def close(eng):  # close(): vLLM shut down (its mark set too), then dropped
        eng.llm.errored = True
        eng.llm = None

    assert run_watch(monkeypatch, engine(SimpleNamespace(errored=False)), close) == []
