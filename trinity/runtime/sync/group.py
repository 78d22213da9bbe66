"""The weight-sync process group: trainer rank 0 and every rollout device, beside the trainer's own group.

A process may hold one default torch.distributed group (the trainer's FSDP group), so this group
is made apart from it, on its own TCP store, with the backend the hardware profile derived
(gloo, nccl or hccl: torch_npu registers hccl). Rank 0 is always trainer rank 0, the sender.

The weights go in pieces (pieces.py): consecutive tensors of one dtype, flattened into one broadcast of up to
synchronizer.sync_bucket_mib. The sender and every receiver cut the same pieces from the same list of shapes and
dtypes (the trainer's weight specs), so only tensors cross the wire. One collective call per tensor cost ~0.5 ms
each over gloo on the demo's 26 tensors.

A group is left (`leave`) when its stage's roles are kept for the next stage, which forms its own: torch keeps
every group it made registered, with its communicator, until it is destroyed.
"""

import datetime
import math
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import GroupName, _new_process_group_helper

from . import pieces

SENDER = 0


def free_port() -> int:
    """A TCP port free on this host now."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def join(
    backend: str, host: str, port: int, rank: int, world_size: int, timeout_s: float, group_name: str
) -> dist.ProcessGroup:
    """Join the group named `group_name`-host-port (synchronizer.group_name: each stage's group is its own; rank 0
    hosts its store); returns when all `world_size` members have joined."""
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size, is_master=rank == SENDER, timeout=timeout)
    name = f"{group_name}-{host}-{port}"
    group, _ = _new_process_group_helper(
        world_size, rank, [], backend, dist.PrefixStore(name, store), group_name=GroupName(name), timeout=timeout
    )
    # its members' ranks, as torch's new_group records them: destroy_process_group reads them when it is left
    dist.distributed_c10d._world.pg_group_ranks[group] = {member: member for member in range(world_size)}
    return group


def leave(group: dist.ProcessGroup | None) -> None:
    """Destroy `group` (None: nothing to leave), so torch drops it and its communicator."""
    if group is not None:
        dist.destroy_process_group(group)


def broadcast(group: dist.ProcessGroup, tensor: torch.Tensor) -> None:
    """Broadcast `tensor` from the sender to every member, in place."""
    options = dist.BroadcastOptions()
    options.rootRank, options.rootTensor = SENDER, 0
    group.broadcast([tensor], options).wait()


def send(group: dist.ProcessGroup, tensors: Iterable[torch.Tensor], limit: int) -> None:
    """Broadcast `tensors` (the sender's, in spec order) piece by piece, each of up to `limit` bytes."""
    for piece in pieces.tensors(tensors, limit):
        broadcast(group, pieces.flatten(piece) if len(piece) > 1 else piece[0].reshape(-1).contiguous())


def receive(
    group: dist.ProcessGroup, specs: Iterable[tuple[tuple, str]], device: str, limit: int
) -> Iterator[torch.Tensor]:
    """Receive the sender's tensors of `specs` (shape, dtype name) as they are cut into pieces, one at a time."""
    named = [["", shape, dtype] for shape, dtype in specs]
    for piece in pieces.plan(named, limit):
        shapes = [tuple(shape) for _, shape, _ in piece]
        flat = torch.empty(sum(math.prod(s) for s in shapes), dtype=getattr(torch, piece[0][2]), device=device)
        broadcast(group, flat)
        yield from pieces.split(flat, shapes)


@contextmanager
def receiving(
    group: dist.ProcessGroup, specs: Iterable[tuple[tuple, str]], device: str, limit: int
) -> Iterator[Iterator[torch.Tensor]]:
    """`receive`'s tensors for the block; what it leaves, even when it fails, is received and dropped on leaving, so
    the sender never waits on a receiver that gave up (nothing more once a broadcast itself failed: the stream ended
    with its error)."""
    tensors = receive(group, specs, device, limit)
    try:
        yield tensors
    finally:
        for _ in tensors:
            pass
