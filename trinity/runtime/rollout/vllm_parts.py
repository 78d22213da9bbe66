"""Where the parts of one vLLM engine meet: an engine spanning several actors (one per node it spans, or one per
device in colocate) is one vLLM multi-node engine, whose head publishes its address and handle for the other parts.

Each part's actor records, before vLLM starts its workers, what those workers need of its node and cannot ask Ray
(they are no Ray workers): the address Ray knows the node by, which vLLM's message queues announce, and the Ray node
itself, by which a worker keys the trainer's device buffers on its device (sync/device_ipc.py).
"""

import os
import time
from typing import Any


def announce_node() -> str:
    """Record this actor's Ray node for the vLLM workers it starts, which build their device keys in their own
    processes: a part on another node than the head's has another node."""
    from ..sync import device_ipc

    return device_ipc.announce_node()


def head_address() -> tuple[str, int]:
    """This node's address (as Ray knows it) and a free port for vLLM's multi-node process group."""
    from ..sync.group import free_port

    return announce_node_address(), free_port()


def announce_node_address() -> str:
    """This node's address as Ray knows it, which vLLM's message queues then announce (vLLM's own guess may be another
    interface)."""
    import ray

    host = ray.util.get_node_ip_address()
    os.environ.setdefault("VLLM_HOST_IP", host)
    return host


def current_actor() -> Any:
    import ray

    return ray.get_runtime_context().current_actor


def publish(key: str, value: Any) -> None:
    import ray.cloudpickle as pickle
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(key, pickle.dumps(value), overwrite=True)


def wait_for(key: str, timeout_s: float) -> Any:
    """What the head published under `key`; a TimeoutError naming it after `timeout_s`."""
    import ray.cloudpickle as pickle
    from ray.experimental import internal_kv

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = internal_kv._internal_kv_get(key)
        if value is not None:
            return pickle.loads(value)
        time.sleep(0.2)
    raise TimeoutError(f"the head of this vLLM engine did not publish its address ({key}) within {timeout_s:g} s")
