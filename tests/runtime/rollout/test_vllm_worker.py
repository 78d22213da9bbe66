"""The worker extension vLLM mixes into its workers, in processes of their own over a real gloo group:
two engines of TP 2 beside trainer rank 0, each worker a rank of its own, every worker given every tensor."""

import multiprocessing
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

LIMIT = 256 * 2**20
SENT = {"embed.weight": [[float(i + 3 * j) for i in range(3)] for j in range(4)], "head.weight": [[2.0] * 3] * 4}


def worker(first_rank, tp_rank, port, world, out, leave):

    from tests.fakes_vllm import Worker
    from trinity.runtime.rollout.base import WeightSpec

    w = Worker(tp_rank, 2)
    rank = w.trinity_join("gloo", "127.0.0.1", port, first_rank, world, 60, "rollout_weight_sync")
    count = w.trinity_receive([WeightSpec(name, (4, 3), "float32").plain() for name in SENT], LIMIT)
    out.put((rank, count, {name: p.tolist() for name, p in w.get_model().named_parameters()}, w.get_model().loaded))
    leave.wait(60)  # a group torn down by the interpreter's exit aborts the process: leave it first
    w.trinity_leave()


def trainer(port, world, out, timeout_s=60, limit=LIMIT, leave=None):
    import torch

    from trinity.runtime.sync import group

    pg = group.join("gloo", "127.0.0.1", port, 0, world, timeout_s, "rollout_weight_sync")
    try:
        group.send(pg, [torch.tensor(values) for values in SENT.values()], limit)
    except RuntimeError as exc:  # a receiver that stopped receiving: the send times out
        out.put(("trainer", "failed", str(exc)[-200:], None))
        return
    out.put(("trainer", 0, None, None))
    if leave is not None:  # the store's host leaves last
        leave.wait(60)
        group.leave(pg)


def test_two_tp2_engines_receive_the_trainers_broadcast_on_ranks_1_to_4(tmp_path):
    from trinity.runtime.rollout.vllm_args import Topology
    from trinity.runtime.sync.group import free_port

    ctx = multiprocessing.get_context("spawn")
    out, port, world = ctx.Queue(), free_port(), 5
    leave = [ctx.Event() for _ in range(world)]
    procs = [ctx.Process(target=trainer, args=(port, world, out, 60, LIMIT, leave[0]))]
    for position in (1, 2):  # what the synchronizer passes each engine actor: its position + 1
        first = Topology(position - 1, 0, 1, 2, 2).first_sync_rank(position)
        procs += [ctx.Process(target=worker, args=(first, tp, port, world, out, leave[first + tp])) for tp in (0, 1)]
    for p in procs:
        p.start()
    results = [out.get(timeout=180) for _ in procs]
    for i in [*range(1, world), 0]:  # the store's host last
        leave[i].set()
        procs[i].join(30)
    assert [p.exitcode for p in procs] == [0] * world
    ranks = sorted(r for r, *_ in results if r != "trainer")
    assert ranks == [1, 2, 3, 4]
    for rank, count, params, loaded in results:
        if rank != "trainer":
            assert count == 2 and params == SENT and loaded == list(SENT)


def test_rank_within_an_engine_counts_data_parallel_replicas_by_their_index():
    """vLLM says data_parallel_rank 0 in every replica of a dense engine; data_parallel_index tells them apart."""
    from tests.fakes_vllm import Worker

    replica1 = Worker(rank=1, world_size=2, data_parallel_index=1)
    assert replica1.parallel_config.data_parallel_rank == 0
    assert replica1.trinity_sync_rank(5) == 5 + 2 + 1
    assert Worker(rank=1, world_size=2, data_parallel_index=0).trinity_sync_rank(5) == 5 + 1


def test_a_receive_whose_load_fails_still_takes_every_broadcast_then_raises(tmp_path):
    """Trainer rank 0 is never left waiting: the worker drains the broadcast, then reports the load's error. Each
    tensor is a bucket of its own here, so the load fails while the second tensor is still unsent; the group's
    timeout is short, so a worker that did not drain fails the trainer in seconds."""
    from trinity.runtime.sync.group import free_port

    ctx = multiprocessing.get_context("spawn")
    out, port = ctx.Queue(), free_port()
    procs = [
        ctx.Process(target=trainer, args=(port, 2, out, 10, 1)),
        ctx.Process(target=failing_worker, args=(port, out)),
    ]
    for p in procs:
        p.start()
    results = sorted((out.get(timeout=180) for _ in procs), key=str)  # each sends its result after all its work
    for p in procs:
        # exit codes are not the point: gloo's teardown at interpreter exit has aborted once ("terminate called")
        p.join(30)
    assert ("trainer", 0, None, None) in results
    assert ("worker", "KeyError", "'no.such.weight'") in results


def failing_worker(port, out):
    from tests.fakes_vllm import Worker
    from trinity.runtime.rollout.base import WeightSpec

    w = Worker(0, 1)
    w.trinity_join("gloo", "127.0.0.1", port, 1, 2, 10, "rollout_weight_sync")
    try:
        w.trinity_receive(
            [
                WeightSpec("no.such.weight", (4, 3), "float32").plain(),
                WeightSpec("head.weight", (4, 3), "float32").plain(),
            ],
            1,  # one tensor a piece, as the trainer cuts them here
        )
    except KeyError as exc:
        out.put(("worker", type(exc).__name__, str(exc)))


@pytest.mark.vllm
def test_a_worker_without_its_own_reload_loads_through_its_model_runner_in_vllms_config_on_its_device(tmp_path):
    """vllm-ascend's NPUWorker is no vLLM Worker: its model runner (a GPUModelRunner) has reload_weights, which is
    called in the worker's vLLM config and with its device as torch's default (vllm-ascend's own update path sets the
    device; vLLM 0.31's Worker sets the config): a layer materialised on reload lands on the worker's device."""
    pytest.importorskip("vllm")
    from safetensors.torch import save_file
    from vllm.config import get_current_vllm_config

    from tests.fakes_vllm import FakeModelRunner
    from trinity.runtime.rollout.vllm_worker import WeightSyncWorker

    seen = []

    class NpuLikeRunner(FakeModelRunner):
        def reload_weights(self, weights_iterator=None) -> None:
            seen.append((get_current_vllm_config(), torch.get_default_device()))
            super().reload_weights(weights_iterator)

    class NpuLikeWorker(WeightSyncWorker):
        def __init__(self):
            self.model_runner, self.device = NpuLikeRunner(), torch.device("cpu")
            self.vllm_config = SimpleNamespace(name="the worker's VllmConfig")  # outside it, vLLM has none set

    worker = NpuLikeWorker()
    save_file({"head.weight": torch.full((4, 3), 5.0)}, str(tmp_path / "w.safetensors"))
    assert worker.trinity_load(str(tmp_path / "w.safetensors")) == 1
    assert worker.model_runner.get_model().loaded == ["head.weight"]
    assert worker.model_runner.get_model().head.weight.eq(5).all()
    assert seen == [(worker.vllm_config, torch.device("cpu"))]
