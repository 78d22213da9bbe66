"""Benchmark of the RFT runtime; each number against a baseline measured in the same run.

1. rollout: tokens/s of the transformers engine (a Ray actor fed concurrent requests, as the explorer
   feeds it) against `model.generate` called directly on the same model and the same batch
   (goal: overhead <= 1.15x), for the demo's model and a larger one;
2. weight sync: trainer rank 0 to an engine over the gloo group, through the actors and the
   synchronizer, against a plain torch.distributed.broadcast of the same tensors between two
   processes (goal <= 1.2x);
3. a short run of the embedded demo: the step-time breakdown (rollout, reward, train, sync) and the
   peak RSS of each role.

    python benchmarks/runtime.py [--repeat N] [--hidden H] [--layers L]

Both comparisons also use a model of --hidden/--layers (default 384 MiB of weights), where generating
and moving bytes, not the few milliseconds of a Ray call, dominate; the demo model is reported beside it.
"""

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
PROMPTS, SAMPLES, NEW_TOKENS = 16, 8, 4


def model_folder(root: Path, hidden: int, layers: int) -> Path:
    """The demo's tokenizer with a Qwen2 of the given size (the demo's own when hidden=128, layers=2)."""
    from transformers import AutoTokenizer

    from trinity import demo

    if not (root / "model").exists():
        demo.build(root)
    if (hidden, layers) == (demo.MODEL_SHAPE["hidden_size"], demo.MODEL_SHAPE["num_hidden_layers"]):
        return root / "model"
    folder = root / f"model_{hidden}x{layers}"
    if not folder.exists():
        shape = {
            **demo.MODEL_SHAPE,
            "hidden_size": hidden,
            "intermediate_size": 4 * hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": 8,
            "num_key_value_heads": 8,
        }
        demo.save_model(folder, AutoTokenizer.from_pretrained(root / "model"), shape, 0)
    return folder


def config_for(model: Path):
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve

    os.environ["TRINITY_DEMO_DIR"] = str(model.parent)
    config = resolve(Request(None, ("hardware=cpu", f"model.model_path={model}"))).stage("grpo")
    return config


def prompts(tokenizer) -> list[list[int]]:
    return [tokenizer(f"{a}+{a + 7}=", add_special_tokens=False)["input_ids"] for a in range(10, 10 + PROMPTS)]


# --- 1. rollout -------------------------------------------------------------------------------------------


def direct_generate_s(model_path: Path, repeat: int) -> float:
    """Median seconds of one batch through `model.generate` in this process (one thread, as an actor of 1 CPU gets)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    rows = [p for p in prompts(tokenizer) for _ in range(SAMPLES)]
    width = max(len(p) for p in rows)
    ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + p for p in rows])
    mask = (ids != tokenizer.pad_token_id).long()
    times = []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        with torch.no_grad():
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=1.0,
                max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS,
                pad_token_id=tokenizer.pad_token_id,
                return_dict_in_generate=True,
                output_logits=True,
            )
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])


def engine_generate_s(model_path: Path, repeat: int) -> float:
    """Median seconds of the same batch as 16 concurrent requests of 8 samples to the engine actor."""
    import ray

    from trinity.runtime.rollout.base import Sampling
    from trinity.runtime.rollout.transformers_engine import TransformersEngine

    config = config_for(model_path)
    engine = (
        ray.remote(TransformersEngine)
        .options(num_cpus=1)
        .remote(name="rollout.engine0", role="rollout", config=config, index=0)
    )
    ray.get(engine.setup.remote(str(model_path), 0))
    from transformers import AutoTokenizer

    batch = prompts(AutoTokenizer.from_pretrained(model_path))
    sampling = Sampling(1.0, 1.0, -1, NEW_TOKENS, NEW_TOKENS)
    times = []
    for _ in range(repeat + 1):
        started = time.perf_counter()
        ray.get([engine.generate.remote(p, SAMPLES, sampling) for p in batch])
        times.append(time.perf_counter() - started)
    ray.kill(engine)
    return statistics.median(times[1:])


# --- 2. weight sync ---------------------------------------------------------------------------------------


def _plain_member(rank: int, port: int, model_path: str, repeat: int, out) -> None:
    from plain_broadcast import broadcast_times
    from safetensors.torch import load_file

    times = broadcast_times(
        rank, port, list(load_file(str(Path(model_path) / "model.safetensors")).values()), repeat + 1
    )
    if rank == 0:
        out.put(statistics.median(times[1:]))


def plain_broadcast_s(model_path: Path, repeat: int) -> float:
    """Median seconds to broadcast every tensor of the model between two bare processes."""
    from trinity.runtime.sync.group import free_port

    ctx = multiprocessing.get_context("spawn")
    out, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=_plain_member, args=(r, port, str(model_path), repeat, out)) for r in range(2)]
    for p in procs:
        p.start()
    result = out.get(timeout=600)
    for p in procs:
        p.join(60)
    return result


def runtime_sync_s(model_path: Path, repeat: int) -> float:
    """Median seconds of a synchronizer.sync (in this process, as in the driver): trainer rank 0 (verl) broadcasts,
    the engine loads."""
    import ray

    from trinity.platforms import get_platform
    from trinity.runtime.rollout.transformers_engine import TransformersEngine
    from trinity.runtime.sync.synchronizer import Synchronizer
    from trinity.runtime.trainer.rank import TrainerRank

    config = config_for(model_path)
    env = {"runtime_env": {"env_vars": get_platform("cpu").verl_env()}}
    rank = (
        ray.remote(TrainerRank)
        .options(num_cpus=1, **env)
        .remote(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
    )
    engine = (
        ray.remote(TransformersEngine)
        .options(num_cpus=1)
        .remote(name="rollout.engine0", role="rollout", config=config, index=0)
    )
    sync = Synchronizer(config, Path(tempfile.mkdtemp()), lambda refs, timeout_s: ray.get(refs, timeout=timeout_s))
    host, port = ray.get(rank.rendezvous.remote())
    ray.get([rank.setup.remote(host, port, str(model_path), 10, None), engine.setup.remote(str(model_path), 0)])
    sync.setup([rank], [engine])
    times = []
    for version in range(1, repeat + 2):
        started = time.perf_counter()
        sync.sync(version)
        times.append(time.perf_counter() - started)
    for actor in (rank, engine):
        ray.kill(actor)
    return statistics.median(times[1:])


# --- 3. a short demo run ------------------------------------------------------------------------------------


def demo_run(root: Path) -> dict:
    """Breakdown per GRPO step from metrics.jsonl, and each role's peak RSS, of 20 SFT + 20 GRPO steps."""
    work = Path(tempfile.mkdtemp())
    env = {
        **os.environ,
        "TRINITY_DEMO_DIR": str(root),
        "TRINITY_CHECKPOINT_ROOT_DIR": str(work / "ckpt"),
        "RAY_TMPDIR": tempfile.mkdtemp(prefix="r", dir="/tmp"),
    }
    args = [
        "stages.0.buffer.total_steps=20",
        "buffer.total_steps=20",
        "trainer.save_interval=0",
        "cluster.ray_address=local",
        "--format",
        "json",
        "--quiet",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "trinity", "run", *args], cwd=work, env=env, capture_output=True, text=True, timeout=1800
    )
    if proc.returncode != 0:
        raise SystemExit(f"demo run failed:\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)
    records = [json.loads(line) for line in (work / "ckpt/trinity-demo/arith/metrics.jsonl").read_text().splitlines()]
    grpo = [r for r in records if r["stage"] == "grpo"]

    def median(role: str) -> float:
        return statistics.median(r["seconds"] for r in grpo if r["role"] == role)

    return {
        "rollout_s": median("explorer"),
        "reward_s": reward_s(root),
        "train_s": median("trainer"),
        "sync_s": median("synchronizer"),
        "peak_rss_mb": {s["name"]: s["peak_rss_mb"] for s in report["stages"]},
    }


def reward_s(root: Path) -> float:
    """Seconds to score one GRPO step's 128 rollouts with the demo's workflow (no generation)."""
    from trinity.config.schema.buffer import FormatConfig
    from trinity.runtime.workflows import Completion, Task, load

    class Answers:  # gives the workflow finished completions, so only scoring is timed
        tokenizer = None

        def prompt(self, task):
            return task.row["prompt"]

        def generate(self, prompt, n):
            return [Completion([1], [2, 3], [-0.5, -0.5], "42", 0)] * n

    workflow, fmt = load("arith_workflow"), FormatConfig()
    tasks = [Task(f"t{i}", {"prompt": f"{i}+1=", "response": str(i + 1)}, fmt, SAMPLES) for i in range(PROMPTS)]
    started = time.perf_counter()
    for task in tasks:
        workflow(task, Answers()).run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--parts", default="rollout,sync,run", help="which parts to run (default: rollout,sync,run)")
    args = parser.parse_args()
    import ray

    root = Path(tempfile.mkdtemp()) / "demo"
    demo_model, big_model = model_folder(root, 128, 2), model_folder(root, args.hidden, args.layers)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    rows, parts = [], args.parts.split(",")
    models = (("demo", demo_model), (f"{args.hidden}x{args.layers}", big_model))
    for label, model in models if "rollout" in parts else ():
        direct, engine = direct_generate_s(model, args.repeat), engine_generate_s(model, args.repeat)
        tokens = PROMPTS * SAMPLES * NEW_TOKENS
        rows += [
            (f"rollout_{label}_direct_tokens_per_s", tokens / direct),
            (f"rollout_{label}_engine_tokens_per_s", tokens / engine),
            (f"rollout_{label}_ratio (goal <= 1.15)", engine / direct),
        ]
    for label, model in models if "sync" in parts else ():
        size = (model / "model.safetensors").stat().st_size / 2**20
        plain, ours = plain_broadcast_s(model, args.repeat), runtime_sync_s(model, args.repeat)
        rows += [
            (f"sync_{label}_{size:.0f}MiB_plain_broadcast_s", plain),
            (f"sync_{label}_trinity_s", ours),
            (f"sync_{label}_ratio (goal <= 1.2)", ours / plain),
        ]
    ray.shutdown()
    if "run" in parts:
        run = demo_run(root)
        rows += [(f"grpo_step_{k}", v) for k, v in run.items() if k != "peak_rss_mb"]
        rows += [
            (f"peak_rss_mb {stage}/{role}", mb)
            for stage, roles in run["peak_rss_mb"].items()
            for role, mb in roles.items()
        ]
    for name, value in rows:
        print(f"{name:52} {value:.4g}")


if __name__ == "__main__":
    main()
