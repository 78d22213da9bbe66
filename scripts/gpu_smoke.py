"""GPU smoke check, one command: detection picks the right profile, and torch.distributed initialises
with the backend trinity derives for it. On an NVIDIA machine:

    python scripts/gpu_smoke.py

prints one JSON object and exits 0 when every step passed. `--allow-cpu` runs the same steps on a
machine without an accelerator (gloo), which is how CI keeps this script working. `--train` then runs
the embedded demo with `engine_type: vllm` for a few steps (vLLM must be installed: the `gpu` extra;
this script installs nothing) and reports reward, tokens/s and sync seconds per step
(`--engine transformers` runs the same step without vLLM).
"""

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from smoke_train import train_check  # noqa: E402

from trinity.cli.doctor import diagnose  # noqa: E402
from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.platforms.detect import detect  # noqa: E402
from trinity.utils import device  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[1] / "examples" / "grpo_gsm8k" / "gsm8k.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def distributed_check(backend: str, device_name: str) -> dict:
    """Initialise a one-rank group with the derived composite backend; all-reduce on the device and on the CPU."""
    import torch
    import torch.distributed as dist

    start = time.perf_counter()
    if device_name != "cpu":
        getattr(torch, device_name).set_device(0)
    dist.init_process_group(backend=backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        on_device = torch.ones(4, device=device_name) * 3
        dist.all_reduce(on_device)
        on_cpu = torch.ones(2) * 5
        dist.all_reduce(on_cpu)
        if device_name != "cpu":
            getattr(torch, device_name).synchronize()
        return {
            "backend_requested": backend,
            "backend_of_device": dist.get_backend(),
            "device_all_reduce": on_device.tolist(),
            "cpu_all_reduce": on_cpu.tolist(),
            "torch": torch.__version__,
            "device_count": getattr(torch, device_name).device_count() if device_name != "cpu" else 0,
            "seconds": round(time.perf_counter() - start, 3),
        }
    finally:
        dist.destroy_process_group()


def ray_check(config) -> dict:
    """A Ray actor that asks for one device sees the one Ray assigned and the driver's decision."""
    try:
        import ray
    except ImportError:
        return {"skipped": "ray is not installed"}
    from trinity.launch.runtime_env import runtime_env

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    hardware = config.hardware
    ask = (
        {"num_gpus": 1}
        if hardware.ray_request == "num_gpus"
        else {"resources": {hardware.ray_resource_key: 1}}
        if hardware.ray_request == "resources"
        else {}
    )
    # its own, even where another Ray runs
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote(num_cpus=0)
        def report():
            from trinity.utils import device as d

            return {"device": d.get_device_type(), "visible": os.environ.get(hardware.visible_devices_env or "", None)}

        return ray.get(report.options(runtime_env=runtime_env(config, "trainer"), **ask).remote())
    finally:
        ray.shutdown()


def main(expect: str = "") -> int:
    """Every step; `expect` names the device type the machine must have (npu_smoke.py passes npu)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow-cpu", action="store_true", help="run on a machine without an accelerator")
    parser.add_argument("--train", action="store_true", help="also train the demo for a few steps through trinity run")
    parser.add_argument(
        "--engine", default="vllm", choices=["vllm", "transformers"], help="rollout engine of --train (default: vllm)"
    )
    parser.add_argument("--steps", type=int, default=5, help="GRPO steps of --train (default: 5)")
    parser.add_argument("--sft-steps", type=int, default=30, help="SFT warm-up steps before them (default: 30)")
    args = parser.parse_args()
    found = detect()
    resolved = resolve(Request(REFERENCE, ("hardware=auto",)))
    hardware = resolved.config.hardware
    device.use_hardware(hardware)
    report = {
        "detected": found.summary(),
        "profile": hardware.name,
        "selected_by": hardware.selected_by,
        "device": device.get_device_name(),
        "collective_backend": device.get_collective_backend(),
        "process_group_backend": device.get_process_group_backend(),
        "sync_method": resolved.config.synchronizer.sync_method,
    }
    report["doctor"] = [f"{p['severity']}: {p['message']}" for p in diagnose()["problems"]]
    if found.device_type == "cpu" and not args.allow_cpu:
        report["error"] = "no accelerator found; pass --allow-cpu to run the CPU path"
        print(json.dumps(report, indent=2))
        return 1
    if expect and found.device_type not in (expect, "cpu"):
        report["error"] = f"this machine has {found.device_type} devices, not {expect}"
        print(json.dumps(report, indent=2))
        return 1
    report["distributed"] = distributed_check(device.get_process_group_backend(), device.get_device_name())
    report["ray"] = ray_check(resolved.config)
    if args.train:
        report["train"] = train_check(args.engine, args.sft_steps, args.steps)
    print(json.dumps(report, indent=2))
    return 0 if report.get("train", {}).get("exit_code", 0) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
