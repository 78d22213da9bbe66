"""Device IPC on this machine's accelerator, as a colocated memory sync uses it (trinity/runtime/sync/device_ipc.py):
one process exports a device buffer by its handle, another on the same device maps it and reads it, without a copy
through host memory. Run it on a GPU (CUDA IPC) or an NPU (torch_npu's IPC, CANN 8.3.RC1 or newer) before a
colocated run; on a machine without an accelerator it says so and exits 1.

    python scripts/device_ipc_check.py

Prints one JSON object: the device, the key the buffer was exported under, whether the reader saw the writer's values,
and the seconds the mapping took; exits 0 when the reader saw them.
"""

import json
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MIB = 2**20


def reader(handles: dict, key: str, out) -> None:
    """In a process of its own, on the same device: map the buffer and send back what it holds."""
    import torch

    from trinity.runtime.sync import device_ipc

    started = time.perf_counter()
    mapped = device_ipc.open_handle(handles, key, torch.accelerator.current_device_index())
    total, first, device = float(mapped.double().sum()), float(mapped[0]), str(mapped.device)
    seconds = time.perf_counter() - started
    del mapped
    out.put({"sum": total, "first": first, "device": device, "seconds": round(seconds, 4)})


def main() -> int:
    import torch

    from trinity.runtime.sync import device_ipc
    from trinity.utils import device as devices

    if not torch.accelerator.is_available():
        print(json.dumps({"error": "no accelerator here: device IPC needs a GPU or an NPU"}))
        return 1
    decision = devices.decide()
    buffer = torch.arange(64 * MIB // 2, dtype=torch.bfloat16, device=torch.accelerator.current_accelerator())
    key = device_ipc.device_key("this-host", decision.platform.visible_devices_env, buffer.device.index or 0)
    handles = device_ipc.export(buffer, key)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=reader, args=(handles, key, out))
    proc.start()
    seen = out.get(timeout=120)
    proc.join(60)
    device_ipc.release(buffer.device.type)
    want = float(buffer.double().sum())
    report = {"device": str(buffer.device), "key": key, "bytes": buffer.numel() * 2, "reader": seen}
    report["same_values"] = seen["sum"] == want and seen["first"] == float(buffer[0]) and proc.exitcode == 0
    print(json.dumps(report, indent=2))
    return 0 if report["same_values"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
