"""The training step of the accelerator smoke scripts (gpu_smoke.py --train, npu_smoke.py): the embedded
demo with `engine_type: vllm` on `hardware=auto` for a few steps, through `trinity run` as a user runs it.
It installs nothing; it prints reward, tokens/s, sync seconds and logprob_diff (the trainer's old
log-probs against the engine's) per GRPO step from the run's metrics.

The demo places one rollout engine and one trainer rank on a device each where a node has two; on a
machine with a single device the config layer lowers the demo's two devices per node to the one there
is and runs the GRPO stage in mode colocate (trainer and engine take turns on it; weights by memory
sync, device IPC where the platform has it): `trinity config render --explain mode` says why.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def overrides(engine: str, sft_steps: int, steps: int) -> list[str]:
    """The demo, shortened: a short SFT warm-up, then `steps` GRPO steps on `engine`."""
    return [
        "hardware=auto",
        "cluster.ray_address=local",  # a Ray of its own, even where another one runs ($RAY_ADDRESS, where set, wins)
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


def train_check(engine: str = "vllm", sft_steps: int = 30, steps: int = 5, timeout_s: float = 1500) -> dict:
    """Run the shortened demo in a fresh folder; returns its exit code, per-step metrics and, on failure,
    stderr's tail."""
    folder = Path(tempfile.mkdtemp(prefix="trinity-smoke-"))
    env = {
        **os.environ,
        "TRINITY_CHECKPOINT_ROOT_DIR": str(folder / "checkpoints"),
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    command = [sys.executable, "-m", "trinity", "run", *overrides(engine, sft_steps, steps), "--quiet"]
    try:
        proc = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout_s)
        code, err = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, err = (
            124,
            (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or ""),
        )
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
