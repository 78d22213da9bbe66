"""The demo's GRPO update, two ways in one process on the same batch: trinity's trainer rank (the batch built from
experiences, then verl's update through trinity's engines) and grpo_step.py's plain loop's update (`policy_step`: one
forward of the padded batch, log-softmax at the responses, the clipped loss, backward, clipping; fused AdamW).
Interleaved step by step, each way's median and the ratio: the update's cost beside the plain loop's without the rest
of a run (other processes, Ray, generation), so without most of `grpo_step.py`'s noise.

    python benchmarks/update_step.py [--steps 60] [--threads 2] [--set trainer.use_fused_kernels=false ...]

The batch is the demo's shape: 16 of its training prompts x 8 responses of 1 to 4 tokens (random, seeded), rewards
0 or 1. --threads is the trainer's compute threads (the demo's on a 2-core machine: 2, as its turns share the node).
"""

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from grpo_step import PROMPTS, SAMPLES, policy_step  # first: trinity from this checkout (grpo_step's this_checkout)


def experiences(demo: Path, seed: int) -> list:
    from transformers import AutoTokenizer

    from trinity.runtime.experience import Experience

    tokenizer = AutoTokenizer.from_pretrained(demo / "model")
    rows = [json.loads(line) for line in (demo / "data" / "train.jsonl").read_text().splitlines()[:PROMPTS]]
    draw, vocab, out = random.Random(seed), len(tokenizer), []
    for i, row in enumerate(rows):
        prompt = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        for _ in range(SAMPLES):
            response = [draw.randrange(vocab) for _ in range(draw.randint(1, 4))]
            out.append(Experience(prompt, response, [-1.0] * len(response), float(draw.random() < 0.4), f"g{i}"))
    return out


def trainer_rank(demo: Path, overrides: list[str]):
    """The demo's GRPO trainer rank (one, on the CPU), set up for batches of PROMPTS x SAMPLES."""
    os.environ["TRINITY_DEMO_DIR"] = str(demo)
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer.rank import TrainerRank

    request = Request(None, ("hardware=cpu", *overrides, f"buffer.train_batch_size={PROMPTS * SAMPLES}"))
    config = resolve(request).stage("grpo")
    os.environ.update(get_platform("cpu").verl_env())
    rank = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
    rank.setup("127.0.0.1", free_port(), str(demo / "model"), 10_000, None)
    return rank


def measure(demo: str, overrides: list[str], steps: int, threads: int, out) -> None:
    """In a process of its own (the rank initialises torch.distributed): both ways, interleaved."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    import logging

    import torch
    from transformers import Qwen2ForCausalLM

    torch.set_num_threads(threads)

    # verl patches the trained model's class (fused kernels): the plain model keeps transformers' forward
    class Plain(Qwen2ForCausalLM):
        forward = Qwen2ForCausalLM.forward

    demo_dir = Path(demo)
    logging.disable(logging.INFO)  # the rank's set-up log (verl's whole config)
    rank = trainer_rank(demo_dir, overrides)
    from trinity.runtime.trainer import batch as batches

    plain = Plain.from_pretrained(demo_dir / "model", dtype=torch.float32)
    optimizer = torch.optim.AdamW(plain.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    exps = experiences(demo_dir, 0)
    padded = batches.padded(exps, 0)
    groups = torch.tensor([e.reward for e in exps]).view(PROMPTS, SAMPLES)
    advantages = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-6)).view(-1)
    width = padded["prompts"].shape[1]
    times = {"plain": [], "trinity": [], "batch": [], "update": []}
    for _ in range(steps + 5):  # the first 5 of each: warm-up
        started = time.perf_counter()
        policy_step(
            plain, optimizer, padded["input_ids"], padded["attention_mask"], width, padded["response_mask"], advantages
        )
        times["plain"].append(time.perf_counter() - started)
        started = time.perf_counter()
        rank.steps.whole = exps
        rank.steps.bind_loss(1, batches.counts(exps))
        built = rank.steps.tensors(exps)[0]
        middle = time.perf_counter()
        rank.workers.actor.update_actor(built)
        ended = time.perf_counter()
        times["trinity"].append(ended - started)
        times["batch"].append(middle - started)
        times["update"].append(ended - middle)
    out.put({name: statistics.median(values[5:]) for name, values in times.items()})


def answer(out, proc, timeout: float = 1800) -> dict:
    """What the measuring process puts on `out`; a process that failed ends the benchmark at once (its traceback is
    on stderr)."""
    import queue

    deadline = time.monotonic() + timeout
    while True:
        try:
            return out.get(timeout=1)
        except queue.Empty:
            if proc.exitcode not in (None, 0) or time.monotonic() > deadline:
                failed = f"the measuring process failed (exit code {proc.exitcode}) or took {timeout:g} s"
                raise SystemExit(failed) from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="a run config override")
    args = parser.parse_args()
    import multiprocessing

    from trinity import demo

    with tempfile.TemporaryDirectory(prefix="update-step-") as folder:
        demo.build(Path(folder), 0)
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        proc = ctx.Process(target=measure, args=(folder, args.overrides, args.steps, args.threads, out))
        proc.start()
        got = answer(out, proc)
        proc.join(60)
    print(f"medians of {args.steps} steps, s ({args.threads} threads; {' '.join(args.overrides) or 'the defaults'}):")
    print(f"  plain update {got['plain']:.4f}")
    print(f"  trinity      {got['trinity']:.4f}  (its batch {got['batch']:.4f}, verl's update {got['update']:.4f})")
    print(f"  ratio        {got['trinity'] / got['plain']:.2f}x")
    print(json.dumps(got))


if __name__ == "__main__":
    main()
