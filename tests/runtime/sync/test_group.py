"""The weight-sync group forms beside a trainer's own process group and broadcasts from trainer rank 0, the weights
in pieces that the sender and every receiver cut alike; a kept role leaves it (torch then forgets it)."""

import multiprocessing

import pytest

torch = pytest.importorskip("torch")

# (shape, dtype) in spec order: two float32 tensors share a piece, bf16 starts another, float32 again a third
LIMIT = 2**20
SPECS = [((2, 3), "float32"), ((4,), "float32"), ((3,), "bfloat16"), ((1, 1), "float32")]


def weights() -> list:
    return [torch.arange(n, dtype=getattr(torch, d)).reshape(s) + 0.5 for n, (s, d) in zip((6, 4, 3, 1), SPECS)]


def member(rank, world, port, out, leave):
    import torch.distributed as dist

    from trinity.runtime.sync import group

    if rank == 0:  # trainer rank 0 already holds its FSDP group, as in a run
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{group.free_port()}", rank=0, world_size=1)
    pg = group.join("gloo", "127.0.0.1", port, rank, world, 60, "rollout_weight_sync")
    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3) if rank == 0 else torch.zeros(2, 3)
    group.broadcast(pg, tensor)
    if rank == 0:
        group.send(pg, weights(), LIMIT)
        received = weights()
    else:
        received = list(group.receive(pg, SPECS, "cpu", LIMIT))
    out.put((rank, (tensor.tolist(), [(t.dtype, t.tolist()) for t in received])))
    # gloo aborts a process whose group is torn down by the interpreter's exit ("terminate called without an active
    # exception": torch's registry keeps a group `del` lets go of): every member is done before any leaves, destroys
    # its groups itself, and rank 0 (the store's host) leaves last
    group.broadcast(pg, torch.zeros(1))
    leave.wait(60)
    group.leave(pg)
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
    assert [p.exitcode for p in procs] == [0] * world
    sent = [(t.dtype, t.tolist()) for t in weights()]
    assert results == {r: ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], sent) for r in range(world)}


def test_a_group_left_is_no_longer_registered_with_torch():
    """A kept trainer rank or engine leaves its stage's group: torch would keep it and its communicator otherwise."""
    import torch.distributed as dist

    from trinity.runtime.sync import group

    port = group.free_port()
    pg = group.join("gloo", "127.0.0.1", port, 0, 1, 30, "my_sync")
    name = dist.distributed_c10d._get_process_group_name(pg)
    assert name == f"my_sync-127.0.0.1-{port}"  # synchronizer.group_name, the stage's own address beside it
    assert name in dist.distributed_c10d._world.pg_names.values()
    group.leave(pg)
    assert name not in dist.distributed_c10d._world.pg_names.values()
    group.leave(None)  # nothing to leave: no error


def test_an_engine_joins_the_group_synchronizer_group_name_names(demo_assets, monkeypatch):
    """Every member names the group as the config says (Trinity-RFT's synchronizer.group_name): a member naming it
    otherwise would wait on a store prefix nobody else writes."""
    import asyncio

    import torch.distributed as dist

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.rollout.transformers_engine import TransformersEngine
    from trinity.runtime.sync import group

    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    config = resolve(Request(None, ("hardware=cpu", "synchronizer.group_name=arith_sync"))).stage("grpo")
    engine = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
    port = group.free_port()
    asyncio.run(engine.join_sync_group("gloo", "127.0.0.1", port, 0, 1, 30))
    assert dist.distributed_c10d._get_process_group_name(engine._group) == f"arith_sync-127.0.0.1-{port}"
    engine.release()


PIECES = 200  # of 4 MiB each: the broadcast is still going when the killed member dies after its fourth


def survivor_member(rank, ports, out, killed_at):
    """Rank 0 sends; rank 2 dies inside the broadcast; rank 1's receive (a thread holding the weights' lock, as an
    engine's receive_weights does) is pending. Then, as after an engine's replacement, rank 0 and rank 1 each leave
    the old group and form a new one, which carries the next broadcast."""
    import os
    import signal
    import threading
    import time

    from trinity.runtime.sync import group

    old = {"group": group.join("gloo", "127.0.0.1", ports[0], rank, 3, 60, "old")}
    specs = [((1024, 1024), "float32")] * PIECES
    if rank == 2:
        for i, _ in enumerate(group.receive(old["group"], specs, "cpu", 4 << 20)):
            if i == 3:
                killed_at.value = time.time()
                os.kill(os.getpid(), signal.SIGKILL)
    lock = threading.Lock()
    if rank == 0:
        try:
            group.send(old["group"], [torch.ones(1024, 1024)] * PIECES, 4 << 20)
        except RuntimeError:  # the dead member's connection
            pass
    else:

        def pending() -> None:
            with lock:
                try:
                    list(group.receive(old["group"], specs, "cpu", 4 << 20))
                except RuntimeError:
                    out.put(("old receive failed", time.time()))

        threading.Thread(target=pending, daemon=True).start()
        while killed_at.value == 0:
            time.sleep(0.05)
    group.leave(old.pop("group"))  # the group formed anew: each member leaves the old one, holding no reference
    new = group.join("gloo", "127.0.0.1", ports[1], rank, 2, 60, "new")
    tensor = torch.full((4,), 7.0) if rank == 0 else torch.zeros(4)
    with lock:  # a receive waits for the pending one, as receive_weights waits for the weights' lock
        group.broadcast(new, tensor)
    out.put((f"rank {rank} has the new weights", time.time(), tensor.tolist()))
    group.broadcast(new, torch.zeros(1))
    group.leave(new)


def test_a_member_killed_inside_a_broadcast_frees_the_survivors_once_the_sender_leaves_the_group():
    """Survivors of a death mid-broadcast do not wait out the group's timeout (60 s here; synchronizer.sync_timeout
    in a run): their pending receive fails as the sender leaves the old group, and the group formed anew works."""
    from trinity.runtime.sync.group import free_port

    ctx = multiprocessing.get_context("spawn")
    out, ports, killed_at = ctx.Queue(), (free_port(), free_port()), ctx.Value("d", 0.0)
    procs = [ctx.Process(target=survivor_member, args=(rank, ports, out, killed_at)) for rank in range(3)]
    for p in procs:
        p.start()
    said = dict((what, (at, rest)) for what, at, *rest in (out.get(timeout=50) for _ in range(3)))
    for p in procs:
        p.join(30)
    assert said["rank 0 has the new weights"][1] == said["rank 1 has the new weights"][1] == [[7.0] * 4]
    assert said["old receive failed"][0] - killed_at.value < 15  # not the group's 60 s
    assert [p.exitcode for p in procs] == [0, 0, -9]
