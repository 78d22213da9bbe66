"""The weight-sync benchmarks' baseline: a plain torch.distributed gloo broadcast of the same tensors between
two processes, with nothing of trinity or vLLM in between."""

import time


def broadcast_times(rank: int, port: int, tensors: list, rounds: int) -> list[float]:
    """Seconds of each of `rounds` broadcasts of `tensors` from rank 0 to rank 1 (call it on both ranks)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    buffers = tensors if rank == 0 else [torch.empty_like(t) for t in tensors]
    times = []
    for _ in range(rounds):
        dist.barrier()
        started = time.perf_counter()
        for t in buffers:
            dist.broadcast(t, src=0)
        times.append(time.perf_counter() - started)
    dist.destroy_process_group()
    return times
