"""The demo's GRPO, the same work done three ways from one SFT checkpoint: trinity (`trinity run`, the demo's GRPO
stage), a plain PyTorch loop (generate and update in one process), and Hugging Face TRL's `GRPOTrainer` given an
interpreter that has it (`--trl-python`; skipped, and said so, otherwise).

TRL cannot live beside trinity: with TRL installed, verl 0.9.1 imports `AutoModelForCausalLMWithValueHead` from it,
which TRL 1.x no longer has, and every trainer rank fails. So TRL gets a virtualenv of its own that sees the rest:

    python -m venv --system-site-packages .venv-trl && .venv-trl/bin/pip install trl==1.16.0

The same work: the demo's training problems in file order, 16 prompts x 8 samples per step at temperature 1 (at most
4 response tokens, at least 1), rewards by exact match, group-normalised advantages, the clipped policy loss
averaged over tokens, AdamW at lr 1e-4 on a cosine schedule to 0.1x, gradients clipped at 1.0, fp32. Reported for
each: seconds per step (steady state: from the first to the last train step, evaluations left out), held-out
accuracy (greedy, the demo's 200 problems) at the start and the end, and peak memory summed over its processes, with
the ratios to trinity. Goals (issue 22): trinity <= 1.0x TRL and <= 1.3x the plain loop in seconds per step at
equal accuracy; memory <= 2x TRL's.

    python benchmarks/grpo_step.py [--steps 300] [--sft-steps 400] [--trl-python .venv-trl/bin/python]
                                   [--width 512 --layers 4]   # a larger model of the same task

Also printed: where a step goes (medians): explore (generate and score), train (the update), sync (the weights
to the engine), and the rest of the step (for trinity, the driver's calls between the roles).
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from this_checkout import REPO  # first: trinity from this checkout, in this process and every one it starts

from trinity.runtime.roles.base import peak_rss_mb  # each process's own peak, as the run reports its roles'

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
PROMPTS, SAMPLES, MAX_TOKENS, LR, MIN_LR_RATIO, CLIP, EPS = 16, 8, 4, 1.0e-4, 0.1, 0.2, 1e-6


def demo_config() -> dict:
    return yaml.safe_load((REPO / "examples" / "arith" / "arith.yaml").read_text())


def trinity(config: dict, work: Path, demo: Path, overrides: tuple[str, ...] = ()) -> dict:
    """`trinity run` of `config` in `work` (with command-line `overrides`): its JSON report."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "run.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "TRINITY_DEMO_DIR": str(demo), "TRINITY_CHECKPOINT_ROOT_DIR": str(work / "ckpt")}
    command = [sys.executable, "-m", "trinity", "run", "-c", "run.yaml", "cluster.ray_address=local", *overrides]
    proc = subprocess.run(
        [*command, "--format", "json", "--quiet"], cwd=work, env=env, capture_output=True, text=True, timeout=3600
    )
    if proc.returncode != 0:
        raise SystemExit(f"trinity run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def sft_checkpoint(work: Path, demo: Path, steps: int) -> Path:
    """The demo's SFT stage alone, `steps` steps: the checkpoint every GRPO here starts from."""
    config = demo_config()
    sft = config.pop("stages")[0]
    sft["buffer"]["total_steps"] = steps
    trinity({**config, "stages": [sft], "trainer": {**config["trainer"], "save_interval": 0}}, work, demo)
    return work / "ckpt" / "trinity-demo" / "arith" / "checkpoints" / f"global_step_{steps}"


def unpaused(t: float, pauses: list[tuple[float, float]]) -> float:
    """Time `t` less the time spent in those `pauses` (start, end) that began before it: a clock stopped while
    evaluating."""
    return t - sum(min(end, t) - start for start, end in pauses if start < t)


def steady_s(times: list[float], pauses: list[tuple[float, float]] = ()) -> float:
    """Seconds per step from the first step's end to the last's (start-up and the `pauses`, evaluations, left out)."""
    times = [unpaused(t, pauses) for t in times]
    return (times[-1] - times[0]) / (len(times) - 1)


def trinity_grpo(
    work: Path, demo: Path, start: Path, steps: int, overrides: tuple[str, ...], eval_every: int = 0
) -> dict:
    """The demo's GRPO stage from `start`, `steps` steps, evaluated at the start, every `eval_every` explore steps
    (0: none between) and at the end."""
    config = demo_config()
    config.pop("stages")
    config["model"]["model_path"] = str(start)
    config["buffer"]["total_steps"] = steps
    config["trainer"]["save_interval"] = 0
    config["explorer"]["eval_interval"] = eval_every or steps  # steps: at the start and the end only
    launched = time.time()
    report = trinity(config, work, demo, overrides)
    records = [json.loads(line) for line in (work / "ckpt/trinity-demo/arith/metrics.jsonl").read_text().splitlines()]
    # the driver waits for an evaluation and writes nothing meanwhile: it began as the line before its own was written
    evals = [
        (records[i - 1]["time"] if i else r["time"], r["time"], r["step"], r["accuracy"])
        for i, r in enumerate(records)
        if r["role"] == "eval"
    ]
    step_times = [r["time"] for r in records if r["role"] == "trainer"]
    peaks = report["stages"][0]["peak_rss_mb"]  # every role's process and the driver's
    roles = {"explore": "explorer", "train": "trainer", "sync": "synchronizer"}  # part -> its metrics lines' role
    return {
        "s_per_step": steady_s(step_times, [e[:2] for e in evals]),
        "accuracy": (evals[0][3], evals[-1][3]),
        "evals": evals,  # (start, end, weight version, accuracy), wall-clock seconds
        "step_times": step_times,  # each train step's end
        "launched": launched,
        "memory_mb": sum(peaks.values()),
        "processes": peaks,
        "parts": {part: median([r["seconds"] for r in records if r["role"] == role]) for part, role in roles.items()},
    }


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# --- the plain loop -------------------------------------------------------------------------------------------------


def plain_grpo(demo: Path, start: Path, steps: int, seed: int, eval_every: int = 0) -> dict:
    """The same GRPO in one process: Hugging Face generate, then the loss and AdamW on the same model; evaluated at
    the start, every `eval_every` steps (0: none between) and at the end."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(start)
    model = AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32)
    rows, held_out = problems(demo)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _cosine(s, steps))
    evals = Evals(model, tokenizer, held_out, steps, eval_every)
    evals.run(0)
    times, explore, train = [], [], []
    for step in range(steps):
        batch = [rows[(step * PROMPTS + i) % len(rows)] for i in range(PROMPTS)]
        seconds = update(model, tokenizer, optimizer, batch)
        schedule.step()
        times.append(time.time())
        explore.append(seconds[0])
        train.append(seconds[1])
        evals.due(step + 1)
    rss = peak_rss_mb()
    return {
        "s_per_step": steady_s(times, evals.pauses),
        "accuracy": (evals.done[0][3], evals.done[-1][3]),
        "evals": evals.done,
        "step_times": times,
        "memory_mb": rss,
        "processes": {"loop": rss},
        "parts": {"explore": median(explore), "train": median(train), "sync": None},
    }


class Evals:
    """Held-out accuracy at step 0, every `every` steps (0: none between) and after the last, each timed."""

    def __init__(self, model, tokenizer, rows: list[dict], steps: int, every: int):
        self.model, self.tokenizer, self.rows, self.steps, self.every = model, tokenizer, rows, steps, every
        self.done: list[tuple[float, float, int, float]] = []  # (start, end, step, accuracy), wall-clock seconds

    def due(self, step: int) -> None:
        if step == self.steps or (self.every and step % self.every == 0):
            self.run(step)

    def run(self, step: int) -> None:
        training = self.model.training
        started = time.time()
        value = accuracy(self.model, self.tokenizer, self.rows)
        self.done.append((started, time.time(), step, value))
        self.model.train(training)

    @property
    def pauses(self) -> list[tuple[float, float]]:
        return [e[:2] for e in self.done]


def problems(demo: Path) -> tuple[list[dict], list[dict]]:
    """The demo's training problems in file order, and its held-out ones."""
    read = lambda name: [json.loads(line) for line in (demo / "data" / name).read_text().splitlines()]  # noqa: E731
    return read("train.jsonl"), read("test.jsonl")


def _cosine(step: int, total: int) -> float:
    return MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * step / total))


def generate(model, tokenizer, prompts: list[str], n: int, greedy: bool):
    """(sequences, prompt width, response mask): `n` responses per prompt, prompts left-padded."""
    import torch

    tokenizer.padding_side = "left"
    encoded = tokenizer(
        [p for p in prompts for _ in range(n)], return_tensors="pt", padding=True, add_special_tokens=False
    )
    with torch.no_grad():
        out = model.generate(
            **encoded,
            do_sample=not greedy,
            temperature=None if greedy else 1.0,
            top_k=None if greedy else 0,
            top_p=None if greedy else 1.0,
            max_new_tokens=MAX_TOKENS,
            min_new_tokens=1,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    width = encoded["input_ids"].shape[1]
    response = out[:, width:]
    ended = (response == tokenizer.eos_token_id).int().cumsum(1)
    mask = (ended - (response == tokenizer.eos_token_id).int()) == 0  # up to and with the end of sequence
    return out, encoded["attention_mask"], width, mask


def rewards(tokenizer, sequences, width: int, mask, answers: list[str]) -> list[float]:
    texts = [tokenizer.decode(s[width:][m], skip_special_tokens=True).strip() for s, m in zip(sequences, mask)]
    return [float(text == answer.strip()) for text, answer in zip(texts, answers)]


def accuracy(model, tokenizer, rows: list[dict]) -> float:
    model.eval()
    sequences, _, width, mask = generate(model, tokenizer, [r["prompt"] for r in rows], 1, greedy=True)
    return sum(rewards(tokenizer, sequences, width, mask, [r["response"] for r in rows])) / len(rows)


def update(model, tokenizer, optimizer, batch: list[dict]) -> tuple[float, float]:
    """One GRPO step on `batch`: generate, score, group-normalise, one clipped policy-gradient update; returns the
    seconds of the first three and of the update."""
    import torch

    started = time.perf_counter()
    model.eval()
    sequences, prompt_mask, width, mask = generate(model, tokenizer, [r["prompt"] for r in batch], SAMPLES, False)
    reward = torch.tensor(
        rewards(tokenizer, sequences, width, mask, [r["response"] for r in batch for _ in range(SAMPLES)])
    )
    groups = reward.view(PROMPTS, SAMPLES)
    advantages = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + EPS)).view(-1)
    explored = time.perf_counter()
    model.train()
    policy_step(model, optimizer, sequences, torch.cat([prompt_mask, mask.long()], 1), width, mask, advantages)
    return explored - started, time.perf_counter() - explored


def policy_step(model, optimizer, sequences, attention, width: int, mask, advantages) -> None:
    """One clipped policy-gradient update on left-padded prompts of `width` columns and their responses (`mask`: the
    response tokens trained), averaged over tokens, gradients clipped at 1.0."""
    import torch

    logits = model(sequences, attention_mask=attention).logits[:, width - 1 : -1]
    logp = torch.log_softmax(logits.float(), -1).gather(2, sequences[:, width:, None]).squeeze(2)
    ratio = torch.exp(logp - logp.detach())  # on-policy: 1, with the gradient of log p
    per_token = torch.max(-advantages[:, None] * ratio, -advantages[:, None] * ratio.clamp(1 - CLIP, 1 + CLIP))
    loss = (per_token * mask).sum() / mask.sum()
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


# --- TRL ------------------------------------------------------------------------------------------------------------


def trl_grpo(demo: Path, start: Path, steps: int, seed: int, work: Path, eval_every: int = 0) -> dict | None:
    """TRL's GRPOTrainer on the same work, or None when TRL is not installed; evaluated at the start, every
    `eval_every` steps (0: none between) and at the end."""
    try:
        import trl
    except ImportError:
        return None
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    tokenizer = AutoTokenizer.from_pretrained(start)
    model = AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32)
    rows, held_out = problems(demo)
    answers = {r["prompt"]: r["response"] for r in rows}

    def exact(prompts, completions, **_):
        return [float(c.strip() == answers[p].strip()) for p, c in zip(prompts, completions)]

    args = trl.GRPOConfig(
        output_dir=str(work / "trl"),
        max_steps=steps,
        per_device_train_batch_size=PROMPTS * SAMPLES,
        num_generations=SAMPLES,
        max_completion_length=MAX_TOKENS,
        temperature=1.0,
        generation_kwargs={"min_new_tokens": 1},
        learning_rate=LR,
        lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": MIN_LR_RATIO},
        max_grad_norm=1.0,
        beta=0.0,
        epsilon=CLIP,
        loss_type="dapo",  # token-mean over the batch
        use_cpu=True,
        bf16=False,
        seed=seed,
        shuffle_dataset=False,
        report_to=[],
        save_strategy="no",
        logging_steps=steps,
    )
    data = Dataset.from_list([{"prompt": r["prompt"]} for r in rows[: steps * PROMPTS]])
    trainer = trl.GRPOTrainer(
        model=model, reward_funcs=exact, args=args, train_dataset=data, processing_class=tokenizer
    )
    evals = Evals(model, tokenizer, held_out, steps, eval_every)
    evals.run(0)
    times = []

    class Clock(TrainerCallback):
        def on_step_end(self, _args, state, *_, **__):
            times.append(time.time())
            evals.due(state.global_step)

    trainer.add_callback(Clock())
    trainer.train()
    rss = peak_rss_mb()
    return {
        "s_per_step": steady_s(times, evals.pauses),
        "accuracy": (evals.done[0][3], evals.done[-1][3]),
        "evals": evals.done,
        "step_times": times,
        "memory_mb": rss,
        "processes": {"trl": rss},
        "version": trl.__version__,
    }


def in_subprocess(
    which: str,
    demo: Path,
    start: Path,
    steps: int,
    seed: int,
    work: Path,
    python: str = sys.executable,
    eval_every: int = 0,
) -> dict | None:
    """The plain loop or TRL in a process of its own (its peak memory is its own), run by `python`."""
    command = [python, __file__, "--worker", which, "--demo", str(demo), "--start", str(start)]
    command += ["--steps", str(steps), "--seed", str(seed), "--work", str(work), "--eval-every", str(eval_every)]
    launched = time.time()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=7200)
    if proc.returncode != 0:
        raise SystemExit(f"{which} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.splitlines()[-1])
    return result and {**result, "launched": launched}


def table(results: dict[str, dict | None]) -> str:
    ours = results["trinity"]
    lines = [
        f"{'':8} {'s/step':>8} {'x trinity':>10} {'accuracy start -> end':>22} {'memory MiB':>11} {'x trinity':>10}"
    ]
    for name, r in results.items():
        if r is None:
            lines.append(f"{name:8} skipped: no --trl-python")
            continue
        a0, a1 = r["accuracy"]
        lines.append(
            f"{name:8} {r['s_per_step']:8.3f} {r['s_per_step'] / ours['s_per_step']:10.2f} {a0:10.3f} -> {a1:.3f}"
            f"     {r['memory_mb']:11.0f} {r['memory_mb'] / ours['memory_mb']:10.2f}"
        )
    lines.append(
        f"one standard error of a held-out accuracy near 0.8 over 200 problems: {math.sqrt(0.8 * 0.2 / 200):.3f}"
    )
    lines.append(
        f"where a step goes (medians, s; other: the step less the three): {'explore':>8} {'train':>8} "
        f"{'sync':>8} {'other':>8}"
    )
    for name, r in results.items():
        if r is not None and r.get("parts"):
            parts = r["parts"]
            other = r["s_per_step"] - sum(v or 0 for v in parts.values())
            shown = [f"{v:8.4f}" if v is not None else f"{'-':>8}" for v in parts.values()]
            lines.append(f"{name:8} {'':54} {' '.join(shown)} {other:8.4f}")
    return "\n".join(lines)


def prepare(work: Path, seed: int, sft_steps: int, width: int | None = None, layers: int | None = None) -> Path:
    """The demo's assets in `work`/demo (its model `width` wide and `layers` deep where given: a larger model of the
    same task, to see how the overheads weigh beside more compute) and the SFT checkpoint that GRPO starts from."""
    from trinity import demo

    demo.build(work / "demo", seed)
    if width or layers:
        from transformers import AutoTokenizer

        width = width or demo.MODEL_SHAPE["hidden_size"]
        layers = layers or demo.MODEL_SHAPE["num_hidden_layers"]
        shape = demo.MODEL_SHAPE | {"hidden_size": width, "intermediate_size": 4 * width, "num_hidden_layers": layers}
        folder = work / "demo" / "model"
        demo.save_model(folder, AutoTokenizer.from_pretrained(folder), shape, seed)
    return sft_checkpoint(work / "sft", work / "demo", sft_steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--sft-steps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, help="the model's hidden size (the demo's: 128; MLP 4x)")
    parser.add_argument("--layers", type=int, help="the model's layers (the demo's: 2)")
    parser.add_argument("--trl-python", help="an interpreter with TRL installed (see above); without it TRL is skipped")
    parser.add_argument(
        "--override", action="append", default=[], help="a key=value for trinity's GRPO run (repeatable), to compare"
    )
    parser.add_argument("--worker", choices=["plain", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--demo", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--start", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--eval-every", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker == "plain":
            result = plain_grpo(args.demo, args.start, args.steps, args.seed, args.eval_every)
        else:
            result = trl_grpo(args.demo, args.start, args.steps, args.seed, args.work, args.eval_every)
        print(json.dumps(result))
        return
    work = Path(tempfile.mkdtemp(prefix="grpo-step-"))
    start = prepare(work, args.seed, args.sft_steps, args.width, args.layers)
    results = {"trinity": trinity_grpo(work / "grpo", work / "demo", start, args.steps, tuple(args.override))}
    results["plain"] = in_subprocess("plain", work / "demo", start, args.steps, args.seed, work)
    results["trl"] = (
        in_subprocess("trl", work / "demo", start, args.steps, args.seed, work, args.trl_python)
        if args.trl_python
        else None
    )
    print(table(results))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
