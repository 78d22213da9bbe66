"""A trainer rank in a process of its own: it initialises torch.distributed, which a test process must not hold."""

import queue
import time


def answer(out, procs: list, timeout: float):
    """The next thing put on `out` within `timeout` s; a process that failed (its traceback on stderr) fails it at
    once, rather than after the whole timeout (one that exited cleanly may have answered already)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return out.get(timeout=1)
        except queue.Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not failed, f"a spawned process failed (exit code {failed[0]}): its traceback is on stderr"
            assert time.monotonic() < deadline, f"no answer in {timeout:g} s"


def spawned(target, *args):
    """What `target(*args, out)` puts on its queue, run in a spawned process (a trainer rank of its own) that must
    exit cleanly."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, out))
    proc.start()
    seen = answer(out, [proc], 240)
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
    got = dict(answer(out, procs, timeout) for _ in procs)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    return got
