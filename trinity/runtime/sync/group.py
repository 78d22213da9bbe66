"""The weight-sync process group: trainer rank 0 and every rollout device, beside the trainer's own group.

A process may hold one default torch.distributed group (the trainer's FSDP group), so this group
is made apart from it, on its own TCP store, with the backend the hardware profile derived
(gloo, nccl or hccl: torch_npu registers hccl). Rank 0 is always trainer rank 0, the sender.
"""

import datetime
import socket

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import GroupName, _new_process_group_helper

SENDER = 0


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
