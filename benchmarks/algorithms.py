"""Trinity-RFT's RL algorithms side by side on the embedded demo, in one invocation, from one SFT checkpoint.

The demo's SFT stage runs once; then each algorithm runs the demo's RL stage from that checkpoint with the same
budget (steps, 16 tasks x 8 rollouts, lr, seed, data order): held-out accuracy (greedy, the 200 problems never
trained on) at the start and end, and seconds per RL step (the stage's wall time over its steps, evaluations
excluded by the median train and rollout times it also reports). `grpo` is the baseline: each algorithm's end
accuracy and seconds per step are also given as a ratio to GRPO's in the same invocation.

    python benchmarks/algorithms.py [--steps 100] [--seed 0] [--only grpo,rloo] [--json OUT]

One standard error of an accuracy over 200 problems is about 0.03: differences below about 0.06 are noise.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "examples" / "arith" / "arith.yaml"
# name -> the algorithm keys its RL stage sets (algorithm_type is the name unless given)
DEMO_DATA = "${oc.env:TRINITY_DEMO_DIR}/data"
ALGORITHMS: dict[str, dict] = {
    "grpo": {},
    "rloo": {},
    "reinforceplusplus": {},
    "ppo": {},
    "opmd": {},
    "asymre": {},
    "topr": {},
    "rec": {},
    "sppo": {},
    "sapo": {},
    "cispo": {},
    "gspo": {},
    "remax": {"algorithm_type": "grpo", "advantage_fn": "remax"},
    "raft": {"advantage_fn_args": {"min_reward": 1.0}},  # SFT on each task's correct answer, if one was found
    "dapo": {"advantage_fn_args": {"std_threshold": 0.0, "duplicate_experiences": True}},  # dynamic sampling
    "mix": {},  # the SFT stage's data mixed into every batch (buffer set in rl_config)
}
# what mix reads: the SFT stage's data set (the demo's training problems with their answers)
SFT_DATA = {"path": DEMO_DATA, "split": "train", "format": {"prompt_type": "plaintext"}}

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def demo_config() -> dict:
    return yaml.safe_load(DEMO.read_text())


def run(config: dict, demo_dir: Path, work: Path) -> tuple[dict, list[dict]]:
    """`trinity run` of `config` in `work`; its JSON report and metrics lines."""
    work.mkdir(parents=True)
    (work / "run.yaml").write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "TRINITY_DEMO_DIR": str(demo_dir),
        "TRINITY_CHECKPOINT_ROOT_DIR": str(work / "ckpt"),
        "RAY_TMPDIR": tempfile.mkdtemp(prefix="r", dir="/tmp"),
    }
    args = ["run", "-c", "run.yaml", "cluster.ray_address=local", "--format", "json", "--quiet"]
    proc = subprocess.run([sys.executable, "-m", "trinity", *args], cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{work.name} failed:\n{proc.stderr[-3000:]}")
    run_dir = work / "ckpt" / config["project"] / config["name"]
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return json.loads(proc.stdout), lines


def sft_checkpoint(demo_dir: Path, root: Path) -> Path:
    """The demo's SFT stage alone; the folder of its last checkpoint (Hugging Face weights)."""
    config = demo_config()
    config["stages"] = config["stages"][:1]
    report, _ = run(config, demo_dir, root / "sft")
    return Path(report["stages"][0]["checkpoint"])


def rl_config(algorithm: str, model: Path, steps: int, seed: int) -> dict:
    """The demo's RL stage (its root config) as a run of its own, from `model`, with `algorithm` and the same budget:
        the demo's repeat_times, optimizer, learning rate and schedule for every algorithm (each with its own
    default arguments: OPMD's loss is divided by 1 + tau), no KL loss, evaluation at the start and end."""
    config = demo_config()
    del config["stages"]
    config["model"]["model_path"] = str(model)
    config["name"] = f"bench-{algorithm}"
    config["algorithm"] |= {"algorithm_type": algorithm, **ALGORITHMS[algorithm]}
    if algorithm == "mix":
        config["buffer"]["trainer_input"]["auxiliary_buffers"] = {"sft_dataset": SFT_DATA}
    config["buffer"]["total_steps"] = steps
    config["explorer"]["eval_interval"] = steps
    config["explorer"]["rollout_model"]["seed"] = seed
    config["trainer"]["save_interval"] = 0
    return config


def measure(algorithm: str, model: Path, demo_dir: Path, root: Path, steps: int, seed: int) -> dict:
    """One algorithm's RL run: accuracy at the start and end, seconds per step, median train and rollout seconds."""
    started = time.perf_counter()
    report, lines = run(rl_config(algorithm, model, steps, seed), demo_dir, root / algorithm)
    stage = report["stages"][0]
    name = next(iter(stage["eval_last"]))
    median = lambda role: statistics.median(r["seconds"] for r in lines if r["role"] == role)  # noqa: E731
    return {
        "start": stage["eval_first"][name],
        "end": stage["eval_last"][name],
        "s_per_step": stage["seconds"] / stage["steps"],
        "train_s": median("trainer"),
        "rollout_s": median("explorer"),
        "wall_s": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(ALGORITHMS), help="comma-separated names of ALGORITHMS (grpo first)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    names = ["grpo", *[n for n in args.only.split(",") if n != "grpo"]]
    root = Path(tempfile.mkdtemp(prefix="trinity-bench-algorithms-"))
    demo_dir = root / "demo"
    from trinity import demo

    demo.build(demo_dir, args.seed)
    model = sft_checkpoint(demo_dir, root)
    rows = {name: measure(name, model, demo_dir, root, args.steps, args.seed) for name in names}
    base = rows["grpo"]
    print(f"{args.steps} RL steps of 16 tasks x 8 rollouts from one SFT checkpoint, seed {args.seed}")
    print(f"{'algorithm':18} {'start':>6} {'end':>6} {'end/grpo':>9} {'s/step':>7} {'x grpo':>7} {'train s':>8}")
    for name, r in rows.items():
        print(
            f"{name:18} {r['start']:6.3f} {r['end']:6.3f} {r['end'] / base['end']:9.2f} {r['s_per_step']:7.3f} "
            f"{r['s_per_step'] / base['s_per_step']:7.2f} {r['train_s']:8.3f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"steps": args.steps, "seed": args.seed, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
