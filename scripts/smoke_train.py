"""The training step of the accelerator smoke scripts (gpu_smoke.py --train, npu_smoke.py): the embedded
demo with `engine_type: vllm` on `hardware=auto` for a few steps, through `trinity run` as a user runs it.
It installs nothing; it prints reward, tokens/s, sync seconds and logprob_diff (the trainer's old
log-probs against the engine's) per GRPO step from the run's metrics.

The demo places one rollout engine and one trainer rank on a device each. On a machine with a single
device both share it: a private Ray is started that declares two devices and leaves every process
the whole machine (the profile's "noset visible devices" variable), vLLM takes 30% of the memory, and
weights move by memory sync (NCCL refuses a communicator whose two ranks are on one GPU).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def overrides(engine: str, sft_steps: int, steps: int) -> list[str]:
    """The demo, shortened: a short SFT warm-up, then `steps` GRPO steps on `engine`."""
    return [
        "hardware=auto",
        "cluster.ray_address=local",  # a Ray of its own, even where another one runs
        f"explorer.rollout_model.engine_type={engine}",
        f"stages.0.buffer.total_steps={sft_steps}",
        f"buffer.total_steps={steps}",
        "explorer.eval_on_startup=false",
        f"explorer.eval_interval={steps + 1}",
        "algorithm.bypass_old_logprobs=false",  # the trainer recomputes the old log-probs and logs logprob_diff
    ]


def per_step(metrics: Path) -> list[dict]:
    """reward, tokens/s (explorer) and sync seconds (synchronizer) of each GRPO step."""
    steps: dict[int, dict] = {}
    for line in metrics.read_text().splitlines():
        record = json.loads(line)
        if record.get("stage") != "grpo":
            continue
        row = steps.setdefault(record["step"], {"step": record["step"]})
        if record["role"] == "explorer":
            row.update(
                reward=record["reward_mean"],
                tokens_per_s=record["tokens_per_s"],
                weight_version=record["weight_version"],
            )
        elif record["role"] == "trainer" and "logprob_diff" in record:
            row.update(logprob_diff=record["logprob_diff"])
        elif record["role"] == "synchronizer":
            row.update(sync_s=record["seconds"], sync_method=record["method"])
        elif record["role"] == "eval":
            row.update(eval_accuracy=record["accuracy"])
    return [steps[k] for k in sorted(steps)]


SHARED_MEMORY_SHARE = 0.3  # of the one device, for vLLM; the trainer takes what is left
SHARED_SYNC = "memory"  # one device cannot hold two ranks of an NCCL group


def train_check(
    engine: str = "vllm", sft_steps: int = 30, steps: int = 5, share_with: Any = None, timeout_s: float = 1500
) -> dict:
    """Run the shortened demo in a fresh folder; returns its exit code, per-step metrics and, on failure,
    stderr's tail. `share_with` (the resolved hardware section) makes the two roles share its one device."""
    folder = Path(tempfile.mkdtemp(prefix="trinity-smoke-"))
    env = {
        **os.environ,
        "TRINITY_CHECKPOINT_ROOT_DIR": str(folder / "checkpoints"),
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    command = [sys.executable, "-m", "trinity", "run", *overrides(engine, sft_steps, steps), "--quiet"]
    ray = _shared_ray(share_with, env) if share_with else None
    if ray:
        env["RAY_ADDRESS"] = ray.stdout.readline().strip()
        command[-1:-1] = [
            f"explorer.rollout_model.gpu_memory_utilization={SHARED_MEMORY_SHARE}",
            f"synchronizer.sync_method={SHARED_SYNC}",
        ]
    try:
        proc = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout_s)
        code, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, err = (
            124,
            (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or ""),
        )
    finally:
        if ray:
            ray.stdin.close()  # its Ray ends with it
            ray.wait(60)
    metrics = folder / "checkpoints" / "trinity-demo" / "arith" / "metrics.jsonl"
    report = {
        "command": " ".join(command[1:]),
        "folder": str(folder),
        "exit_code": code,
        "steps": per_step(metrics) if metrics.exists() else [],
    }
    if code != 0:
        report["stderr_tail"] = err[-3000:]  # the folder stays for a look at logs/
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return report


SHARED_RAY = """
import json, os, sys, ray
cpus = max(4, os.cpu_count() or 4)
context = ray.init(
    address="local", **json.loads(sys.argv[1]), num_cpus=cpus, include_dashboard=False, log_to_driver=False
)
print(context.address_info["gcs_address"], flush=True)
sys.stdin.read()
"""


def _shared_ray(hardware: Any, env: dict) -> subprocess.Popen:
    """A Ray of its own declaring two devices on a one-device machine; every process it starts sees the device."""
    devices = {"num_gpus": 2} if hardware.ray_request == "num_gpus" else {"resources": {hardware.ray_resource_key: 2}}
    command = [sys.executable, "-c", SHARED_RAY, json.dumps(devices)]
    return subprocess.Popen(
        command,
        env={**env, hardware.noset_visible_devices_env: "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
