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
