"""Device IPC: a colocated engine maps the trainer's device buffer instead of receiving a copy through host memory.

The trainer rank exports a piece's flat device buffer with torch's `reduce_tensor` (CUDA IPC handles; torch_npu
replaces it with its own NPU IPC when imported) and keeps the buffer alive until the engines have loaded it. Each
engine worker on the same device rebuilds a tensor from the handle and copies from it. A handle is keyed by its
device (`device_key`: the Ray node and the physical device Ray made visible), since trainer ranks and engine workers
number their devices each from 0; the receiver puts its own device index into the handle, as the sender's index
need not be its own (verl and vllm-ascend do the same). Whether a platform has this is a fact of its record
(`Platform.device_ipc`); nothing here runs on a platform without it.
"""

import os
import pickle
from typing import Any

Handles = dict[str, bytes]  # device_key -> the pickled (rebuild function, its arguments) of one buffer
DEVICE_ARG = 6  # where reduce_tensor puts the device index among a device tensor's rebuild arguments (CUDA and NPU)


def device_key(node: str, visible_devices_env: str | None, index: int) -> str:
    """This process's device `index` as every process on its node names it: the node (Ray's node id: two containers
    may share a host name) and the physical device id (from the visible-devices variable Ray sets, else the index)."""
    visible = os.environ.get(visible_devices_env or "", "")
    ids = [d for d in visible.split(",") if d.strip()]
    physical = ids[index] if index < len(ids) else str(index)
    return f"{node}:{physical}"


def export(buffer: Any, key: str) -> Handles:
    """The handle of `buffer` (a device tensor this process keeps alive until it is loaded) under `key`."""
    from torch.multiprocessing.reductions import reduce_tensor

    rebuild, args = reduce_tensor(buffer)
    return {key: pickle.dumps((rebuild, args))}


def open_handle(handles: Handles, key: str, device_index: int) -> Any:
    """The tensor of the handle exported for device `key`, mapped on this process's device `device_index`."""
    if key not in handles:
        raise KeyError(f"no device buffer was exported for {key} (exported for: {', '.join(sorted(handles))})")
    rebuild, args = pickle.loads(handles[key])
    args = list(args)
    args[DEVICE_ARG] = device_index
    return rebuild(*args)


def release(device_type: str) -> None:
    """Let the device free what exported buffers the engines no longer map (CUDA's ipc_collect, torch_npu's)."""
    import torch

    module = torch.get_device_module(device_type)
    collect = getattr(module, "ipc_collect", None)
    if collect is not None:
        collect()
