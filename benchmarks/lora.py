"""Benchmark of LoRA against full fine-tuning, in one invocation, on the same 34 M-parameter model and GRPO work.

Three short `trinity run`s (the demo's GRPO stage, gloo weight sync every step, transformers engine):
full fine-tuning (the baseline), LoRA with adapter sync (the engines apply the adapter), and LoRA with merged
sync (base + adapter as full weights). For each: median seconds of a weight sync and of a train update (from
metrics.jsonl), the bytes one sync moves, and the trainer's peak resident memory (the run's summary); then
each LoRA number as a ratio to full fine-tuning's.

    python benchmarks/lora.py [--hidden 512] [--layers 8] [--steps 8] [--rank 16] [--json OUT]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime import model_folder  # noqa: E402  (the demo's tokenizer with a Qwen2 of a given size)

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def run(root: Path, model: Path, steps: int, *extra: str) -> dict:
    """One GRPO run of `steps` steps; its medians, sync bytes and the trainer's peak RSS."""
    work = Path(tempfile.mkdtemp())
    env = {
        **os.environ,
        "TRINITY_DEMO_DIR": str(root),
        "TRINITY_CHECKPOINT_ROOT_DIR": str(work / "ckpt"),
        "RAY_TMPDIR": tempfile.mkdtemp(prefix="r", dir="/tmp"),
    }
    args = ["~stages", f"model.model_path={model}", f"buffer.total_steps={steps}", "trainer.save_interval=0"]
    args += ["explorer.eval_on_startup=false", "cluster.ray_address=local", *extra, "--format", "json", "--quiet"]
    proc = subprocess.run(
        [sys.executable, "-m", "trinity", "run", *args], cwd=work, env=env, capture_output=True, text=True, timeout=3600
    )
    if proc.returncode != 0:
        raise SystemExit(f"run {' '.join(extra) or 'full'} failed:\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)
    run_dir = work / "ckpt/trinity-demo/arith"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    seconds = lambda role: statistics.median(r["seconds"] for r in records if r["role"] == role)  # noqa: E731
    peaks = report["stages"][0]["peak_rss_mb"]
    return {
        "sync_s": seconds("synchronizer"),
        "train_s": seconds("trainer"),
        "sync_mib": sync_bytes(run_dir, model, extra) / 2**20,
        "trainer_peak_rss_mib": max(mb for role, mb in peaks.items() if role.startswith("trainer")),
    }


def sync_bytes(run_dir: Path, model: Path, extra: tuple) -> int:
    """What one sync moves: the adapter (the last checkpoint's adapter file), or every weight in fp32."""
    checkpoint = sorted((run_dir / "checkpoints").iterdir())[-1]
    if any("lora_configs" in e for e in extra) and "synchronizer.lora_sync=merged" not in extra:
        return (checkpoint / "adapter_model.safetensors").stat().st_size
    return (model / "model.safetensors").stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp()) / "demo"
    model = model_folder(root, args.hidden, args.layers)
    lora = f"+model.lora_configs=[{{lora_rank: {args.rank}, lora_alpha: {2 * args.rank}}}]"
    runs = {
        "full": run(root, model, args.steps),
        "lora_adapter": run(root, model, args.steps, lora),
        "lora_merged": run(root, model, args.steps, lora, "synchronizer.lora_sync=merged"),
    }
    size = (model / "model.safetensors").stat().st_size / 2**20
    print(
        f"model {args.hidden}x{args.layers} ({size:.0f} MiB fp32), LoRA rank {args.rank} all-linear, {args.steps} steps"
    )
    for name, numbers in runs.items():
        for key, value in numbers.items():
            ratio = "" if name == "full" else f"   {value / runs['full'][key]:.3g}x full"
            print(f"{name:13} {key:22} {value:10.4g}{ratio}")
    if args.json:
        args.json.write_text(json.dumps({"model_mib": size, "rank": args.rank, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
