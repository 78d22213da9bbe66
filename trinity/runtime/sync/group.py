"""The weight-sync process group: trainer rank 0 and every rollout device, beside the trainer's own group.

A process may hold one default torch.distributed group (the trainer's FSDP group), so this group
is made apart from it, on its own TCP store, with the backend the hardware profile derived
(gloo, nccl or hccl: torch_npu registers hccl). Rank 0 is always trainer rank 0, the sender.

The weights go in buckets: consecutive tensors of one dtype, flattened into one broadcast of up to
BUCKET_BYTES. The sender and every receiver cut the same buckets from the same list of shapes and
dtypes (the trainer's weight specs), so only tensors cross the wire. One collective call per
tensor cost ~0.5 ms each over gloo on the demo's 26 tensors.
"""

import datetime
import math
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import GroupName, _new_process_group_helper

SENDER = 0
BUCKET_BYTES = 256 * 2**20  # one broadcast's most: bounded memory for the copies on either side, few calls
T = TypeVar("T")


def free_port() -> int:
    """A TCP port free on this host now."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def join(backend: str, host: str, port: int, rank: int, world_size: int, timeout_s: float) -> dist.ProcessGroup:
    """Join the group (rank 0 hosts its store); returns when all `world_size` members have joined."""
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size, is_master=rank == SENDER, timeout=timeout)
    name = f"trinity-weight-sync-{host}-{port}"
    group, _ = _new_process_group_helper(
        world_size, rank, [], backend, dist.PrefixStore(name, store), group_name=GroupName(name), timeout=timeout
    )
    return group


def broadcast(group: dist.ProcessGroup, tensor: torch.Tensor) -> None:
    """Broadcast `tensor` from the sender to every member, in place."""
    options = dist.BroadcastOptions()
    options.rootRank, options.rootTensor = SENDER, 0
    group.broadcast([tensor], options).wait()


def send(group: dist.ProcessGroup, tensors: Iterable[torch.Tensor]) -> None:
    """Broadcast `tensors` (the sender's, in spec order) bucket by bucket."""
    for bucket in _buckets(tensors, lambda t: (t.dtype, t.numel() * t.element_size())):
        flat = torch.cat([t.reshape(-1) for t in bucket]) if len(bucket) > 1 else bucket[0].reshape(-1)
        broadcast(group, flat.contiguous())


def receive(group: dist.ProcessGroup, specs: Iterable[tuple[tuple, str]], device: str) -> Iterator[torch.Tensor]:
    """Receive the sender's tensors of `specs` (shape, dtype name) as they are cut into buckets, one at a time."""
    typed = [(tuple(shape), getattr(torch, dtype)) for shape, dtype in specs]
    for bucket in _buckets(typed, lambda s: (s[1], math.prod(s[0]) * s[1].itemsize)):
        sizes = [math.prod(shape) for shape, _ in bucket]
        flat = torch.empty(sum(sizes), dtype=bucket[0][1], device=device)
        broadcast(group, flat)
        yield from (part.view(shape) for part, (shape, _) in zip(flat.split(sizes), bucket))


@contextmanager
def receiving(
    group: dist.ProcessGroup, specs: Iterable[tuple[tuple, str]], device: str
) -> Iterator[Iterator[torch.Tensor]]:
    """`receive`'s tensors for the block; what it leaves, even when it fails, is received and dropped on leaving, so
    the sender never waits on a receiver that gave up (nothing more once a broadcast itself failed: the stream ended
    with its error)."""
    tensors = receive(group, specs, device)
    try:
        yield tensors
    finally:
        for _ in tensors:
            pass


def _buckets(items: Iterable[T], kind: Callable[[T], tuple[torch.dtype, int]]) -> Iterator[list[T]]:
    """Consecutive items of one dtype up to BUCKET_BYTES together (a larger one alone)."""
    bucket: list[T] = []
    dtype, size = None, 0
    for item in items:
        item_dtype, item_size = kind(item)
        if bucket and (item_dtype != dtype or size + item_size > BUCKET_BYTES):
            yield bucket
            bucket, size = [], 0
        bucket.append(item)
        dtype, size = item_dtype, size + item_size
    if bucket:
        yield bucket
