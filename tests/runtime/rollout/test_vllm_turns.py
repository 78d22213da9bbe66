"""Requests beside each other and updates alone, and in colocate the engine's sleep and wake (vllm_turns.py), through
the vLLM engine actor with fakes of vLLM's AsyncLLM (tests/fakes_vllm.py): sleep mode cannot run on vLLM's CPU build."""

import asyncio

import pytest

torch = pytest.importorskip("torch")

from tests.runtime.rollout.test_vllm_engine import config, fake_vllm, started  # noqa: E402, F401 (fake_vllm: autouse)
from tests.runtime.syncs import memory_sync  # noqa: E402
from trinity.runtime.rollout.samples import Sampling  # noqa: E402


def test_colocated_engine_sleeps_and_wakes_before_it_generates():
    cfg = config("a100", "mode=colocate")
    e = started(cfg)
    assert e.llm.args["enable_sleep_mode"] is True
    asyncio.run(e.sleep())
    asyncio.run(e.generate([1], 1, Sampling()))
    assert [c[:2] for c in e.llm.calls] == [("sleep", 1), ("wake_up", ["weights", "kv_cache"]), e.llm.calls[2][:2]]


def model_weights() -> dict:
    """Every weight of the fake workers' model (tests/fakes_vllm.py FakeModel)."""
    return {"embed.weight": torch.ones(4, 3), "head.weight": torch.ones(4, 3)}


def test_a_sync_wakes_the_weights_alone_and_generating_wakes_the_kv_cache():
    """colocate: the KV cache stays asleep while the trainer still holds its state and the sync's buffers; the
    next generate wakes it (verl: weights, sync, then kv_cache)."""
    e = started(config("a100", "mode=colocate"))
    asyncio.run(e.sleep(1))
    assert asyncio.run(e.wake_up(["weights"])) is True  # the KV cache still sleeps
    memory_sync(e, model_weights(), 4)
    asyncio.run(e.generate([1], 1, Sampling()))
    wakes = [c for c in e.llm.calls if c[0] in ("sleep", "wake_up", "generate")]
    assert wakes == [("sleep", 1), ("wake_up", ["weights"]), ("wake_up", ["kv_cache"]), wakes[-1]]
    assert wakes[-1][0] == "generate"


def test_weights_a_deep_sleep_discarded_are_refused_until_a_sync_refills_them():
    """Level 2 keeps no copy of the weights (no pinned host copy copied back only to be overwritten): the driver
    asks for it only where a sync follows before the engines generate; should one not, the engine refuses."""
    e = started(config("a100", "mode=colocate"))
    asyncio.run(e.sleep(2))
    with pytest.raises(RuntimeError, match="slept at level 2 .* before a sync gave it every weight"):
        asyncio.run(e.generate([1], 1, Sampling()))
    asyncio.run(e.sleep(2))  # the failed generate woke it: asleep again, weights discarded
    memory_sync(e, model_weights(), 4)
    version, _ = asyncio.run(e.generate([1], 1, Sampling()))
    assert version == 4 and ("sleep", 2) in e.llm.calls


def test_a_sleep_after_a_sync_that_left_the_kv_cache_asleep_wakes_it_first():
    """vLLM sleeps an engine whole: what a sync left asleep wakes before the engine sleeps again."""
    e = started(config("a100", "mode=colocate"))
    asyncio.run(e.sleep(1))
    asyncio.run(e.wake_up(["weights"]))
    asyncio.run(e.sleep(1))
    assert [c for c in e.llm.calls if c[0] in ("sleep", "wake_up")] == [
        ("sleep", 1),
        ("wake_up", ["weights"]),
        ("wake_up", ["kv_cache"]),
        ("sleep", 1),
    ]


def test_an_engine_that_does_not_share_devices_never_sleeps():
    e = started(config())
    asyncio.run(e.sleep())
    assert e.llm.calls == [] and e.llm.args["enable_sleep_mode"] is False
