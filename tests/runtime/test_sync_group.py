"""The weight-sync group forms beside a trainer's own process group and broadcasts from trainer rank 0, the weights
in buckets that the sender and every receiver cut alike."""

import multiprocessing

import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

# (shape, dtype) in spec order: two float32 tensors share a bucket, bf16 starts another, float32 again a third
SPECS = [((2, 3), "float32"), ((4,), "float32"), ((3,), "bfloat16"), ((1, 1), "float32")]


def weights() -> list:
    return [torch.arange(n, dtype=getattr(torch, d)).reshape(s) + 0.5 for n, (s, d) in zip((6, 4, 3, 1), SPECS)]


def member(rank, world, port, out, leave):
    import torch.distributed as dist

    from trinity.runtime.sync import group

    if rank == 0:  # trainer rank 0 already holds its FSDP group, as in a run
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{group.free_port()}", rank=0, world_size=1)
    pg = group.join("gloo", "127.0.0.1", port, rank, world, 60)
    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3) if rank == 0 else torch.zeros(2, 3)
    group.broadcast(pg, tensor)
    if rank == 0:
        group.send(pg, weights())
        received = weights()
    else:
        received = list(group.receive(pg, SPECS, "cpu"))
    out.put((rank, (tensor.tolist(), [(t.dtype, t.tolist()) for t in received])))
    # gloo aborts a process whose group is torn down by the interpreter's exit while a peer (or the store that rank
    # 0 hosts) goes away: every member is done before any leaves, drops its groups, and rank 0 leaves last
    group.broadcast(pg, torch.zeros(1))
    leave.wait(60)
    del pg
    if rank == 0:
        dist.destroy_process_group()


def test_broadcast_reaches_every_engine():
    from trinity.runtime.sync.group import free_port

    ctx = multiprocessing.get_context("spawn")
    out, port, world = ctx.Queue(), free_port(), 3
    leave = [ctx.Event() for _ in range(world)]
    procs = [ctx.Process(target=member, args=(rank, world, port, out, leave[rank])) for rank in range(world)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in range(world))
    for rank in [*range(1, world), 0]:  # the store's host last
        leave[rank].set()
        procs[rank].join(30)
    assert all(p.exitcode == 0 for p in procs)
    sent = [(t.dtype, t.tolist()) for t in weights()]
    assert results == {r: ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], sent) for r in range(world)}


@given(
    st.lists(st.tuples(st.integers(1, 40), st.sampled_from(["float32", "bfloat16"])), max_size=12),
    st.integers(1, 100),
)
def test_buckets_are_runs_of_one_dtype_each_as_full_as_the_limit_allows(items, limit):
    from trinity.runtime.sync import group

    kind = lambda item: (item[1], item[0])  # noqa: E731 - (dtype, bytes)
    saved, group.BUCKET_BYTES = group.BUCKET_BYTES, limit
    try:
        buckets = list(group._buckets(items, kind))
    finally:
        group.BUCKET_BYTES = saved
    assert [item for bucket in buckets for item in bucket] == items  # every item once, in order
    for bucket, after in zip(buckets, [*buckets[1:], None]):
        assert len({d for _, d in bucket}) == 1
        assert len(bucket) == 1 or sum(n for n, _ in bucket) <= limit  # one larger than the limit goes alone
        if after:  # the next item did not fit: another dtype, or past the limit
            assert after[0][1] != bucket[0][1] or sum(n for n, _ in bucket) + after[0][0] > limit
