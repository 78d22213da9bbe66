"""Device IPC: a colocated engine maps the trainer's device buffer instead of receiving a copy through host memory.

A trainer rank that shares its device with an engine worker exports a piece's flat device buffer with torch's
`reduce_tensor` (CUDA IPC handles; torch_npu replaces it with its own NPU IPC when imported) and keeps the buffer
until the engines have loaded it. The engine worker on that device rebuilds a tensor from the handle and copies from
it. A handle is keyed by its device (`device_key`: the Ray node and the physical device Ray made visible), since
trainer ranks and engine workers number their devices each from 0; each process builds its own key, from its own
node (`this_node`) and its own visible devices, and the receiver puts its own device index into the handle, as the
sender's index need not be its own (vLLM and vllm-ascend do the same: vLLM keys by the device's UUID,
vllm/distributed/weight_transfer/ipc_engine.py; vllm-ascend by host and physical chip, npu_ipc_engine.py).

What torch needs of the exporter:
- The buffer lies in an ordinary segment of the caching allocator. Memory in an expandable segment (the GPU and NPU
  profiles give the trainer `expandable_segments:True`) is shared as a file descriptor that the reader takes with
  pidfd_getfd from the exporting process, which Linux refuses between Ray's sibling processes under common ptrace
  settings and in containers (pytorch/pytorch#165685), and each import reserves address space for the whole device.
  `ordinary_segments` turns them off while a sync exports (the allocator then serves only ordinary blocks:
  c10/cuda/CUDACachingAllocator.cpp get_free_block), as verl does around its colocated update
  (verl/workers/engine_workers.py, set_expandable_segments).
- The buffer's bytes are written before its handle leaves: the device is synchronised first (vllm-ascend's producer
  synchronises its stream before each chunk; CUDA's export records an event the reader waits on, torch_npu's may not).
- Every handle is opened once: the export sets a reference count the reader's mapping takes over and returns when it
  is dropped (torch/csrc/CudaIPCTypes.cpp); the buffer of a handle nobody opens stays allocated in the exporter until
  it exits. So only ranks beside an engine worker export (launch/plan.py `beside_an_engine`).
Whether a platform has device IPC is its record's fact and, on NPUs, the node's driver release's (platforms/ipc.py);
nothing here runs on a platform without it.
"""

import os
import pickle
import warnings
from collections.abc import Callable
from typing import Any

Handles = dict[str, bytes]  # device_key -> the pickled (rebuild function, its arguments) of one buffer
DEVICE_ARG = 6  # where reduce_tensor puts the device index among a device tensor's rebuild arguments (CUDA and NPU)
NODE_ENV = "TRINITY_NODE_ID"  # the Ray node of an actor, for the processes it starts (vLLM's workers)
EXPANDABLE = "expandable_segments"


def announce_node() -> str:
    """Record this actor's Ray node for the processes it starts from now on (vLLM's workers are no Ray workers), and
    return it."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    os.environ[NODE_ENV] = node
    return node


def this_node() -> str:
    """The Ray node this process runs on: the one its actor recorded (`announce_node`), else, in a Ray worker,
    Ray's."""
    node = os.environ.get(NODE_ENV)
    if node:
        return node
    import ray

    return ray.get_runtime_context().get_node_id()


def device_key(visible_devices_env: str | None, index: int, node: str | None = None) -> str:
    """This process's device `index` as every process on its node names it: the node (Ray's node id: two containers
    may share a host name; `this_node` by default) and the physical device id (from the visible-devices variable Ray
    sets, else the index)."""
    visible = os.environ.get(visible_devices_env or "", "")
    ids = [d for d in visible.split(",") if d.strip()]
    physical = ids[index] if index < len(ids) else str(index)
    return f"{node or this_node()}:{physical}"


def export(buffer: Any, key: str) -> Handles:
    """The handle of `buffer` (a device tensor this process keeps until it is loaded) under `key`, once the device has
    written it."""
    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    if torch.accelerator.is_available():
        torch.accelerator.synchronize()
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


# --- the caching allocator's segments while a sync exports ---------------------------------------------------------


def ordinary_segments(device_type: str, alloc_conf_env: str | None) -> Callable[[], None]:
    """From now on this process allocates its device memory in ordinary segments, which another process can map;
    returns the call that turns expandable segments back on where they were (the allocator's live settings, or the
    variable the platform's allocator reads them from: `alloc_conf_env`)."""
    were = expandable_segments(alloc_conf_env)
    set_allocator(device_type, f"{EXPANDABLE}:False")
    return lambda: set_allocator(device_type, f"{EXPANDABLE}:{were}")


def expandable_segments(alloc_conf_env: str | None) -> bool:
    """Whether this process's caching allocator maps memory in expandable segments: torch's live accelerator settings
    where they name the setting (they read PYTORCH_ALLOC_CONF and PYTORCH_CUDA_ALLOC_CONF, and show later changes),
    else the variable the platform's allocator read at its start (`alloc_conf_env`: torch_npu's PYTORCH_NPU_ALLOC_CONF,
    which torch's settings do not show)."""
    import torch

    live = getattr(torch._C, "_accelerator_getAllocatorSettings", lambda: "")()
    settings = live if EXPANDABLE in live else os.environ.get(alloc_conf_env or "", "")
    entries = [entry.replace(" ", "").lower() for entry in settings.split(",")]
    return f"{EXPANDABLE}:true" in entries


def set_allocator(device_type: str, setting: str) -> None:
    """Change one of the caching allocator's settings for this process: the device module's call (torch_npu's for the
    NPU allocator), else torch's accelerator settings."""
    import torch

    memory = getattr(torch.get_device_module(device_type), "memory", None)
    call = getattr(memory, "_set_allocator_settings", None) or torch._C._accelerator_setAllocatorSettings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.cuda's name for torch's own call is deprecated
        call(setting)
