"""A trainer rank in a process of its own: it initialises torch.distributed, which a test process must not hold."""


def spawned(target, *args):
    """What `target(*args, out)` puts on its queue, run in a spawned process (a trainer rank of its own) that must
    exit cleanly."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, out))
    proc.start()
    seen = out.get(timeout=240)
    proc.join(60)
    assert proc.exitcode == 0
    return seen


def two_ranks(target, *args, timeout: float = 120) -> dict:
    """{rank: what it put} of two trainer ranks in one gloo group, each spawned in a process of its own that must exit
    cleanly: `target(rank, port, *args, out)` puts (rank, what) on its queue within `timeout` s."""
    import multiprocessing

    from trinity.runtime.sync.group import free_port

    ctx, port = multiprocessing.get_context("spawn"), free_port()
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(rank, port, *args, out)) for rank in (0, 1)]
    for proc in procs:
        proc.start()
    got = dict(out.get(timeout=timeout) for _ in procs)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    return got
