"""The driver's watcher of role calls (RayCalls) on a real Ray: a kind that ends is reported while another still
runs, a wait gives up after its timeout, and a role that raises is named."""

import threading

import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


@ray.remote(num_cpus=0)
class Gate:
    """Holds a call until `open` (the test's stand-in for a long train step)."""

    def __init__(self):
        import asyncio

        self.opened = asyncio.Event()

    async def open(self) -> None:
        self.opened.set()

    async def held(self) -> str:
        await self.opened.wait()
        return "held"


@ray.remote(num_cpus=0)
class Quick:
    def answer(self, value: str) -> str:
        return value

    def fail(self) -> None:
        raise ValueError("the role's own error")

    def peak_rss_mb(self) -> float:
        return 1.0


@pytest.fixture(scope="module")
def actors(tmp_path_factory):
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _temp_dir=str(tmp_path_factory.mktemp("r")))
    try:
        yield Gate.remote(), Quick.remote()
    finally:
        ray.shutdown()


def test_a_kind_that_ends_is_reported_while_another_still_runs(actors, monkeypatch):
    from trinity.runtime import calls

    gate, quick = actors
    monkeypatch.setattr(calls, "WAIT_S", 60.0)  # a wait for every call would end only when the gate opens
    watcher = calls.RayCalls({"gate": gate, "quick": quick})
    watcher.start("train", [gate.held.remote()])
    watcher.start("explore", [quick.answer.remote("explored")])
    opener = threading.Timer(5.0, lambda: gate.open.remote())
    opener.start()
    try:
        assert watcher.next_done() == [("explore", ["explored"])]  # before the gate opens
        assert watcher.next_done() == [("train", ["held"])]
    finally:
        opener.join()


def test_a_wait_gives_up_after_its_timeout_and_a_role_that_raises_is_named(actors, monkeypatch):
    from trinity.runtime import calls

    gate, quick = actors
    monkeypatch.setattr(calls, "WAIT_S", 0.2)
    watcher = calls.RayCalls({"quick": quick})
    with pytest.raises(TimeoutError, match=r"1 of 2 calls still running after 1 s"):
        watcher.wait([quick.answer.remote("a"), Gate.remote().held.remote()], timeout_s=1)
    assert watcher.wait([quick.answer.remote("b")], timeout_s=1) == ["b"]
    with pytest.raises(calls.RoleFailed, match=r"a role failed: ValueError: the role's own error"):
        watcher.wait([quick.fail.remote()])
