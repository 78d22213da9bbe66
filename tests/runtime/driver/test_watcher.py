"""The driver's watcher of role calls (RayWatcher) on a real Ray: a kind that ends is reported while another still
runs, a wait gives up after its timeout, a role that raises is named, and so is the role whose death made another
fail. Without Ray: what is shown of an error (a device runtime's boilerplate left out)."""

import threading
import time

import pytest

from trinity.runtime.driver.watcher import _how, cause_of

ray = pytest.importorskip("ray")


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
class Busy:
    """A role busy with a long call: a call on it waits behind that one."""

    def work(self) -> None:
        time.sleep(30)

    def peak_rss_mb(self) -> float:
        return 1.0


@ray.remote(num_cpus=0)
class Quick:
    def answer(self, value: str) -> str:
        return value

    def fail(self) -> None:
        raise ValueError("the role's own error")

    def relay(self, other) -> None:
        ray.get(other.die.remote())  # as the explorer waits on an engine

    def die(self) -> None:
        import os

        os._exit(1)

    def die_after(self, seconds: float) -> None:
        import time

        time.sleep(seconds)
        self.die()

    def lose_peer(self) -> None:
        raise RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:44183")

    def peak_rss_mb(self) -> float:
        return 1.0


@pytest.fixture(scope="module")
def actors(tmp_path_factory):
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _temp_dir=str(tmp_path_factory.mktemp("r")))
    try:
        yield Gate.remote(), Quick.remote()
    finally:
        ray.shutdown()


@pytest.mark.ray
def test_a_kind_that_ends_is_reported_while_another_still_runs(actors, monkeypatch):
    from trinity.runtime.driver import watcher as calls

    gate, quick = actors
    monkeypatch.setattr(calls, "WAIT_S", 60.0)  # a wait for every call would end only when the gate opens
    watcher = calls.RayWatcher({"gate": gate, "quick": quick})
    watcher.start("train", [gate.held.remote()])
    watcher.start("explore", [quick.answer.remote("explored")])
    opener = threading.Timer(5.0, lambda: gate.open.remote())
    opener.start()
    try:
        assert watcher.next_done() == [("explore", ["explored"])]  # before the gate opens
        assert watcher.next_done() == [("train", ["held"])]
    finally:
        opener.join()


@pytest.mark.ray
def test_a_wait_gives_up_after_its_timeout_and_a_role_that_raises_is_named(actors, monkeypatch):
    from trinity.runtime.driver import watcher as calls

    gate, quick = actors
    monkeypatch.setattr(calls, "WAIT_S", 0.2)
    watcher = calls.RayWatcher({"quick": quick})
    with pytest.raises(TimeoutError, match=r"1 of 2 calls still running after 1 s"):
        watcher.wait([quick.answer.remote("a"), Gate.remote().held.remote()], timeout_s=1)
    assert watcher.wait([quick.answer.remote("b")], timeout_s=1) == ["b"]
    with pytest.raises(calls.RoleFailed, match=r"^quick failed: ValueError: the role's own error$"):
        watcher.wait([quick.fail.remote()])


@pytest.mark.ray
def test_a_role_that_failed_because_another_died_names_the_one_that_died(actors):
    from trinity.runtime.driver import watcher as calls

    _, quick = actors
    gone = Quick.remote()
    watcher = calls.RayWatcher({"quick": quick, "gone": gone})
    with pytest.raises(calls.RoleFailed, match=r"^gone died: Worker unexpectedly exits with a connection error code"):
        watcher.wait([quick.relay.remote(gone)])


@pytest.mark.ray
def test_a_peer_that_lost_its_connection_first_is_named_after_the_role_that_died(actors):
    from trinity.runtime.driver import watcher as calls

    peer, victim = Quick.remote(), Quick.remote()
    ray.get([peer.answer.remote("up"), victim.answer.remote("up")])
    watcher = calls.RayWatcher({"peer": peer, "victim": victim})
    started = time.monotonic()
    with pytest.raises(calls.RoleFailed) as failed:  # the peer's error comes 0.3 s before the death
        watcher.wait([peer.lose_peer.remote(), victim.die_after.remote(0.3)])
    first, *rest = str(failed.value).splitlines()
    assert first.startswith("victim died: ") and rest == [
        "then: peer failed: RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:44183"
    ]
    assert time.monotonic() - started < calls.CAUSE_WAIT_S + 2
    assert failed.value.record()["cause_role"] == "victim" and failed.value.failures[0].died


@pytest.mark.ray
def test_a_roles_own_error_ends_the_wait_within_the_settling_time_while_another_role_is_busy(actors):
    from trinity.runtime.driver import watcher as calls

    _, quick = actors
    busy = Busy.remote()
    ray.get(busy.peak_rss_mb.remote())
    watcher = calls.RayWatcher({"busy": busy, "quick": quick})
    watcher.start("train", [busy.work.remote()])  # a call on it waits behind this one
    started = time.monotonic()
    with pytest.raises(calls.RoleFailed, match=r"^quick failed: ValueError: the role's own error$"):
        watcher.wait([quick.fail.remote()])
    assert time.monotonic() - started < calls.SETTLE_S + 2
    ray.kill(busy)


CUDA_ASSERT = """CUDA error: device-side assert triggered
Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more \
information.
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""
CUDA_OOM = """CUDA error: out of memory
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
Device-side assertions were explicitly omitted for this error check; the error probably arose while initializing the \
DSA handlers.
Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:42 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f0d in /torch/lib/libc10.so)
"""
NPU_INNER = """The Inner error is reported as above. The process exits for this inner error, and the current working \
operator name is aclnnRmsNorm.
Since the operator is called asynchronously, the stacktrace may be inaccurate. If you want to get the accurate \
stacktrace, please set the environment variable ASCEND_LAUNCH_BLOCKING=1.
Note: ASCEND_LAUNCH_BLOCKING=1 will force ops to run in synchronous mode, resulting in performance degradation. \
Please unset ASCEND_LAUNCH_BLOCKING in time after debugging.
[ERROR] 2025-10-28-10:45:49 (PID:3859350, Device:0, RankID:-1) ERR00100 PTA call acl api failed.
[PID: 3859350] 2025-10-28-10:45:49.101.223 EZ9999: Inner Error!
EZ9999: The vector core execution is abnormal.
"""


class AcceleratorError(RuntimeError):
    """torch's name for a device error, without importing torch."""


@pytest.mark.parametrize(
    "message, shown",
    [
        (CUDA_ASSERT, ["AcceleratorError: CUDA error: device-side assert triggered"]),
        (CUDA_OOM, ["AcceleratorError: CUDA error: out of memory"]),
        (
            NPU_INNER,
            [
                "AcceleratorError: The Inner error is reported as above. The process exits for this inner error, and "
                "the current working operator name is aclnnRmsNorm.",
                "[PID: 3859350] 2025-10-28-10:45:49.101.223 EZ9999: Inner Error!",
                "EZ9999: The vector core execution is abnormal.",
            ],
        ),
        ("first\n\n  second  \nthird\nfourth\n" + "x" * 300, ["AcceleratorError: first", "second", "third"]),
        ("x" * 300, ["AcceleratorError: " + "x" * 237 + "..."]),
        ("", ["AcceleratorError"]),
    ],
    ids=["cuda assert", "cuda oom", "npu", "first three lines", "long line", "no message"],
)
def test_an_error_shows_its_type_and_meaningful_lines_without_the_device_boilerplate(message, shown):
    assert cause_of(AcceleratorError(message)) == shown


@pytest.mark.parametrize(
    "message, shown",
    [
        (
            "The actor died unexpectedly before finishing this task.\n\tclass_name: TrainerRank\n\tpid: 81\nThe actor"
            " is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Task was"
            " killed due to the node running low on memory. Memory on the node was 30.1GB / 31.3GB.",
            "Task was killed due to the node running low on memory.",
        ),
        (
            "The actor died because of an error raised in its creation task, ray::TrainerRank.__init__() (pid=81)\n"
            "  File \"rank.py\", line 50, in __init__\nKeyError: 'rank'\n",
            "KeyError: 'rank'",
        ),
    ],
    ids=["exit detail", "creation task"],
)
def test_a_death_shows_how_ray_says_the_process_ended(message, shown):
    assert _how(message) == shown
