"""GRPO on a model of a real shape: trinity in modes `colocate` and `both` against a plain PyTorch loop, and each
role's peak memory against `trinity plan memory`'s prediction.

    python benchmarks/scale.py [--size 0.5b|1.5b|7b] [--steps 3] [--prompts 4] [--samples 4] [--max-tokens 16]
                               [--engine transformers|vllm] [--modes colocate,both] [--skip-plain] [--work DIR]
                               [--set KEY=VALUE ...]

The model is a Qwen2 of the size's published shape (SIZES: the Qwen2.5 Instruct config.json values; 7B has its own
152064-row vocabulary and an untied lm_head), its weights drawn from `--seed` (no download), saved in fp32 beside the
embedded demo's character tokenizer (`trinity.demo.build`). That tokenizer knows 15 tokens while the embedding keeps
every row, so nearly every sampled id has no token: the `tokenizers` library leaves such ids out of `decode` (no
error; checked when the model is built: [5, V - 1, 6] decodes as "=9"), responses read as short or empty strings, every
reward and advantage is 0 and the gradients are zero; each update still computes every token's log-prob, loss and
backward, and AdamW steps every weight. Sampling is not restricted: each response runs to max_tokens (the model draws
the end-of-sequence id with a probability of about 1 in 151936 per token; min_response_tokens is max_tokens - 1).

Each step: `prompts` problems of the demo's arithmetic (file order) x `samples` samples, at most `max-tokens` tokens.
trinity runs through `trinity run` (a generated run config, `cluster.ray_address=local`, one engine, one trainer
rank; colocate: both on one device slot, both: one each) with the profile `hardware=auto` picks; the plain loop does
the same steps in one process: Hugging Face `generate`, exact-match rewards, group-normalised advantages, GRPO's
clipped loss averaged over tokens, gradients clipped at 1.0, a fused AdamW step; fp32 weights computing in the
trainer's dtype (autocast where it is narrower), generation in the rollout dtype (a copy the weights are copied into
after each update where that dtype is narrower: the plain loop's sync).

Reported per mode: each role's peak (the run summary's `peak_rss_mb` per actor, the kernel's VmHWM; `peak_device_mb`
where the summary has it, else "not reported") against the memory plan's prediction (trinity/config/memory/plan.py
`plan_memory` on the config `trinity run` resolves; the cpu profile states no device memory, so the plan is given
this machine's RAM as the device's: on the CPU a role's tensors live in its resident memory); the update's seconds
(median of the steps) and MFU (6 x parameters x the tokens the update computes on, prompts and responses, padding left
out, over the update's seconds and the peak FLOP/s of a square matmul in the trainer's dtype measured in the same
invocation); generation's tokens/s; the sync's seconds; the step's seconds (first to last train step); the ratios
trinity/plain on the same devices: on the CPU a device slot is a core, so the plain loop runs with as many threads as
the mode's trainer rank computes with (colocate's one slot: 1, reported as plain/1; both's two, taken in turns: 2,
plain/2), once per count. Medians of 3 steps: the first includes each role's warm-up.

On a GPU: `--size 1.5b` computes in bf16 (the profile's trainer and rollout dtype; `--engine vllm` for vLLM); the plain
loop reports `torch.cuda.max_memory_allocated`, and the memory ratio is taken against the device peak trinity's summary
reports per role (`peak_device_mb`: torch's max_memory_reserved in the trainer rank and a transformers engine; vLLM's
device memory is its workers', "not reported"). A machine with one GPU runs `--modes colocate` only (`both` needs a
device for the trainer and one for the engine). Not run on a GPU yet.

Measured on the 2-core development machine (24 GB shared with other sessions, whose tests kept the load average at
2-5: seconds vary by 2-4x between invocations, memory by at most 6 %), 0.5B, the defaults, two invocations: 11.5 and
7.8 minutes in all (colocate 3.3 and 3.8, both 4.2 and 2.0, the plain loop about 3 and 1.2, the model and the demo's
assets under 1):

    peak memory, MiB          predicted   resident (1st, 2nd)   measured/predicted
    colocate trainer              11866      11871, 11239           1.00, 0.95
    colocate engine                4199       4522,  4453           1.08, 1.06
    both trainer                  11090      10857, 10677           0.98, 0.96
    both engine                    3160       3320,  3422           1.05, 1.08
    plain                             -      10448, 10418              -

    1st; 2nd      update s          MFU        step s    gen tok/s       sync s
    colocate   28.90; 24.39  20.1; 23.1 %  55.42; 44.51  30.2; 26.8  12.92; 9.70
    both       34.98; 16.59  16.6; 34.0 %  53.49; 27.19  19.0; 39.0   6.08; 3.06
    plain      40.93; 10.02  14.2; 56.2 %  79.00; 16.03   6.5; 37.4   0.00; 0.00

(peak 178.5 and 183.8 GFLOP/s fp32.) docs/config.md (the memory fit) has what each prediction is made of.

Where `both`'s update goes (2026-12-05, 0.5B, the defaults, 4 steps, a quiet machine; `--set KEY=VALUE` passes an
override to trinity's runs): 16.14 s a step (MFU 33.5 %); with `--set trainer.use_fused_kernels=false` 15.55 s against
the plain loop's 9.05 s in the same invocation (1.72x). py-spy (`py-spy record --native --rate 20 --pid` of the
trainer rank after its first step, two updates; the plain worker likewise) shares the update out as:

    the layers' backward (matmuls; the tied embedding's backward 1.1 s, the plain loop's 0.3 s)   34.6 %
    the log-probs of the 151,936-token vocabulary (verl's fused kernel: forward 8.5 %, with the
      entropy it always computes; backward 24.4 %, the logits computed again, softmax, one-hot)   32.9 %
    FSDP2 on one rank: gradient reduce-scatter copies 10.1 %, parameter all-gather copies
      before the forward 4.7 % and again before the backward 3.4 %                                18.2 %
    the layers' forward                                                                            10.7 %
    the fused AdamW step 2.1 %, gradient clipping 0.2 %, the rest 1.4 %                            3.7 %

Since 2026-12-06 a trainer of one rank computing in fp32 trains unsharded (trinity/config/unsharded.py): FSDP2's
copies are gone. Measured that day (a quiet machine, 4 steps; the first two rows with `--set
trainer.use_fused_kernels=false`):

    update s          trinity   plain loop (threads)   ratio     before, with FSDP2
    both                 7.46        6.59 (2)           1.13x     14.86 / 9.25 = 1.61x
    colocate            11.77       11.22 (1)           1.05x
    both, the default   13.28        9.40 (2)           1.41x     16.39 / 8.96 = 1.83x (the fused log-probs)

Since that evening the fused forward keeps the responses' rows (trinity/runtime/verl/fused_rows.py: 256 rows, within
one chunk, as plain logits): the default, three invocations, `both` 8.20 / 6.80 = 1.20x, 5.98 / 5.91 = 1.01x, 7.20 /
5.77 = 1.25x; `colocate` 11.18 / 10.42 = 1.07x (the update's seconds moved by up to 25 % between invocations).

The plain loop spends about 2 s on its vocabulary (log_softmax and gather on the response tokens alone) where verl's
kernels, fused or not, spend about 5; FSDP2's copies (about 3 s) have no counterpart in it. The forward pass before
the update that recomputes the old policy (about a third of the update's compute) is gone where nothing reads it
before the update (trinity/runtime/trainer/old_policy.py); runs that keep the engines' log-probs
(algorithm.bypass_old_logprobs, the default) never ran it.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import this_checkout  # noqa: F401  (trinity from this checkout in every process started here)
import yaml

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
MIB = 1 << 20
CLIP, EPS, LR = 0.2, 1e-6, 1e-6

# Qwen2.5 shapes as their published config.json files give them (the Instruct models':
# https://huggingface.co/Qwen/Qwen2.5-{0.5B,1.5B,7B}-Instruct/blob/main/config.json). 7B's vocabulary is 152064 and
# its lm_head untied; 0.5B and 1.5B tie it to the 151936-row embedding.
SIZES: dict[str, dict[str, Any]] = {
    "0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
        rope_theta=1000000.0,
        max_position_embeddings=32768,
        max_window_layers=21,
        rms_norm_eps=1e-6,
    ),
    "1.5b": dict(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        vocab_size=151936,
        tie_word_embeddings=True,
        rope_theta=1000000.0,
        max_position_embeddings=32768,
        max_window_layers=21,
        rms_norm_eps=1e-6,
    ),
    "7b": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        tie_word_embeddings=False,
        rope_theta=1000000.0,
        max_position_embeddings=32768,
        max_window_layers=28,
        rms_norm_eps=1e-6,
    ),
}

ENGINE_KEY = "explorer.rollout_model"  # the memory plan's role name of the rollout engine's check
ROLES = {"trainer": "trainer_node0.rank0", ENGINE_KEY: "rollout.engine0"}  # plan role -> the run's actor


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="0.5b")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps of each run")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step")
    parser.add_argument("--samples", type=int, default=4, help="samples per prompt (GRPO's group)")
    parser.add_argument("--max-tokens", type=int, default=16, help="response tokens (every response has this many)")
    parser.add_argument("--engine", choices=["transformers", "vllm"], default="transformers")
    parser.add_argument("--modes", default="colocate,both", help="trinity's modes to run, comma-separated")
    parser.add_argument("--skip-plain", action="store_true", help="leave the plain loop out")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="an override of trinity's runs (repeatable)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, help="the folder to work in (default: a new temporary folder)")
    parser.add_argument("--worker", choices=["build", "plain", "peak"], help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)  # the trainer's compute dtype
    parser.add_argument("--rollout-dtype", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)  # the plain loop's; default: torch's
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args)))
        return
    started, load = time.perf_counter(), os.getloadavg()  # other processes on the machine slow every part alike
    work = args.work or Path(tempfile.mkdtemp(prefix=f"scale-{args.size}-"))
    child([sys.executable, "-m", "trinity.demo", str(work / "demo")], "building the demo's assets")
    model = worker(args, "build", work)
    results = {mode: trinity_mode(args, work, mode) for mode in args.modes.split(",")}
    compute = results[next(iter(results))]["compute"]  # the device and dtypes the resolved config names
    peak = worker(args, "peak", work, compute)
    if not args.skip_plain:
        results |= plain_runs(args, work, results)
    report = {"size": args.size, "model": model, "peak": peak, "results": results, "load": [load, os.getloadavg()]}
    report |= {"tokens_per_update": update_tokens(args, work), "minutes": (time.perf_counter() - started) / 60}
    add_rates(report)
    print(table(args, report))
    print(json.dumps(report, indent=2))


# --- processes --------------------------------------------------------------------------------------------------------


def child(command: list[str], what: str, cwd: Path | None = None, timeout: float = 4 * 3600) -> str:
    """Run `command`; its stdout, or the end of its stderr as the reason to stop."""
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc.stdout


def worker(args: argparse.Namespace, which: str, work: Path, compute: dict | None = None) -> dict:
    """This script as a `which` worker in a process of its own (its peak memory is its own): its JSON answer."""
    command = [sys.executable, __file__, "--worker", which, "--work", str(work), "--size", args.size]
    command += ["--seed", str(args.seed), "--steps", str(args.steps), "--prompts", str(args.prompts)]
    command += ["--samples", str(args.samples), "--max-tokens", str(args.max_tokens)]
    for key, value in (compute or {}).items():
        if value is not None:
            command += [f"--{key.replace('_', '-')}", str(value)]
    return json.loads(child(command, f"the {which} worker").splitlines()[-1])


# --- the model --------------------------------------------------------------------------------------------------------


def build_worker(args: argparse.Namespace) -> dict:
    """A Qwen2 of the size's shape, weights drawn from the seed, saved in fp32 beside the demo's tokenizer.

    The tokenizer knows 15 characters; the embedding keeps the real 151936 (or 152064) rows, so the model samples
    ids the tokenizer has no token for: `decode` leaves them out (the `tokenizers` library skips an id without a
    token, no error), the responses read as empty or short strings, every reward is 0 and every advantage 0. The
    update still computes every token's log-prob, loss and gradient: the work per step is that of a trained model."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(args.work / "demo" / "model")
    config = Qwen2Config(
        **SIZES[args.size], eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    torch.manual_seed(args.seed)
    model = Qwen2ForCausalLM(config)
    folder = args.work / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    unknown = tokenizer.decode([5, config.vocab_size - 1, 6])  # an id past the tokenizer's vocabulary, between two
    return {
        "parameters": sum(p.numel() for p in model.parameters()),  # a tied lm_head once
        "tokenizer_vocabulary": len(tokenizer),
        "decoded_past_vocabulary": unknown,
    }


def update_tokens(args: argparse.Namespace, work: Path) -> float:
    """Tokens one update computes on, mean over the steps: each sample's prompt (one token per character) and its
    response, padding left out."""
    rows = problems(work)
    per_step = [
        sum(len(rows[step * args.prompts + i]["prompt"]) + args.max_tokens for i in range(args.prompts)) * args.samples
        for step in range(args.steps)
    ]
    return statistics.mean(per_step)


def problems(work: Path) -> list[dict]:
    """The demo's training problems in file order (trinity's taskset reads them so)."""
    return [json.loads(line) for line in (work / "demo" / "data" / "train.jsonl").read_text().splitlines()]


# --- trinity ----------------------------------------------------------------------------------------------------------


def run_config(args: argparse.Namespace, work: Path, mode: str) -> dict:
    """The run: GRPO on the demo's arithmetic, `prompts` x `samples` a step, responses of max_tokens (a random model
    all but never draws the end of sequence before)."""
    length = max(len(r["prompt"]) for r in problems(work)) + args.max_tokens
    taskset = {
        "name": "arith",
        "path": str(work / "demo" / "data"),
        "split": "train",
        "format": {"prompt_type": "plaintext", "prompt_key": "prompt", "response_key": "response"},
        "rollout_args": {"temperature": 1.0},
    }
    return {
        "project": "scale",
        "name": mode,
        "checkpoint_root_dir": str(work / mode / "ckpt"),
        "mode": mode,
        "algorithm": {"algorithm_type": "grpo", "repeat_times": args.samples, "kl_loss_fn": "none"},
        "model": {
            "model_path": str(work / "model"),
            "max_model_len": length,
            "max_response_tokens": args.max_tokens,
            "min_response_tokens": args.max_tokens - 1,  # below the maximum, as trinity asks
        },
        # colocate: the trainer and the engine take turns on one device; both: one each
        "cluster": {"node_num": 1, "gpu_per_node": 1 if mode == "colocate" else 2},
        "buffer": {
            "batch_size": args.prompts,
            "total_steps": args.steps,
            "explorer_input": {"taskset": taskset, "default_workflow_type": "arith_workflow"},
            "trainer_input": {"experience_buffer": {"name": "scale", "storage_type": "queue"}},
        },
        "explorer": {
            "runner_per_model": args.prompts,  # every task of a step at once: one generate call per step
            "eval_on_startup": False,
            "rollout_model": {"engine_type": args.engine, "engine_num": 1, "seed": args.seed},
        },
        "synchronizer": {"sync_method": "online", "sync_style": "fixed", "sync_interval": 1},
        "trainer": {
            "save_interval": 0,
            "save_hf_checkpoint": "never",
            "grad_clip": 1.0,
            # one micro-batch holds the step: the memory plan's tokens per micro-batch are what the update computes
            "max_token_len_per_gpu": args.prompts * args.samples * length,
        },
    }


def trinity_mode(args: argparse.Namespace, work: Path, mode: str) -> dict:
    """`trinity run` of the run in `mode`: its timings, its roles' peaks and the plan's prediction of them."""
    folder = work / mode
    shutil.rmtree(folder / "ckpt", ignore_errors=True)  # a run of an earlier invocation: its metrics are not this one's
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.yaml").write_text(yaml.safe_dump(run_config(args, work, mode)))
    started = time.perf_counter()
    out = child(
        [sys.executable, "-m", "trinity", "run", "-c", "run.yaml", "cluster.ray_address=local", *args.set]
        + ["--format", "json"],
        f"trinity run ({mode})",
        cwd=folder,
    )
    minutes = (time.perf_counter() - started) / 60
    stage = json.loads(out)["stages"][0]
    run_dir = folder / "ckpt" / "scale" / mode
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)  # the last one: weights and Adam moments, 12 P bytes
    return {
        "minutes": minutes,
        **predicted(folder / "run.yaml"),
        **measured(stage),
        **timings(records),
    }


def measured(stage: dict) -> dict:
    """Each role's peak, as the run's summary reports it: resident memory, and device memory where reported."""
    rss = stage["peak_rss_mb"]
    device = stage.get("peak_device_mb")  # roles with an accelerator in their own process (not vLLM's: its workers')
    return {
        "measured_rss_mb": {role: rss[actor] for role, actor in ROLES.items()},
        "measured_device_mb": {role: device.get(actor) for role, actor in ROLES.items()} if device else "not reported",
        "processes_mb": rss,
    }


def timings(records: list[dict]) -> dict:
    """Medians over the steps, from metrics.jsonl: the update, generation's tokens/s, the sync, the step."""

    def of(role: str, key: str) -> list[float]:
        return [r[key] for r in records if r["role"] == role and r.get(key) is not None]

    ends = of("trainer", "time")
    return {
        "update_s": statistics.median(of("trainer", "seconds")),
        "tokens_per_s": statistics.median(of("explorer", "tokens_per_s")),
        "sync_s": statistics.median(of("synchronizer", "seconds") or [0.0]),
        "step_s": (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else None,
    }


def predicted(run_yaml: Path) -> dict:
    """`trinity plan memory`'s peak per role for the run, resolved as `trinity run` resolves it. A profile that states
    no device memory (the cpu profile) gets this machine's: the roles' tensors then live in host memory."""
    from trinity.config.compose import Request
    from trinity.config.memory.plan import plan_memory
    from trinity.config.resolve import resolve

    config = resolve(Request(run_yaml, ("cluster.ray_address=local",))).config
    hardware, memory_from = config.hardware, "the profile"
    if hardware.memory_gb_per_device is None:
        hardware, memory_from = hardware.model_copy(update={"memory_gb_per_device": host_memory_gb()}), "host RAM"
        config = config.model_copy(update={"hardware": hardware})
    plan = plan_memory(config)
    need: dict[str, float] = {}
    for check in plan.checks:
        need.setdefault(check.role, check.need / MIB)  # a role's first check is its peak; later ones are derived
    threads = config.hardware.compute_threads  # where the devices are host cores: a slot is a core
    compute = {
        "device": config.trainer.device,
        "dtype": config.trainer.param_dtype,
        "rollout_dtype": config.explorer.rollout_model.dtype,
        "threads": int(config.env.trainer[threads.env]) if threads else None,  # the trainer rank's
    }
    return {
        "predicted_mb": {role: need.get(role) for role in ROLES},
        "device_memory_gb": hardware.memory_gb_per_device,
        "device_memory_from": memory_from,
        "unchecked": [u.reason for u in plan.unchecked],
        "compute": compute,
    }


def host_memory_gb() -> float:
    """This machine's RAM, in GiB (MemTotal)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / (1 << 20)
    raise SystemExit("no MemTotal in /proc/meminfo")


# --- the plain loop ---------------------------------------------------------------------------------------------------


def plain_runs(args: argparse.Namespace, work: Path, results: dict) -> dict:
    """The plain loop on the devices each mode's trainer has: on the CPU a device slot is a core, so with as many
    threads as the trainer rank computes with (colocate's one slot: 1; both's two, taken in turns: 2), once per count;
    keyed `plain` where every mode has the same, `plain/<threads>` otherwise; each mode's result names its run
    (`plain_run`)."""
    counts = {r["compute"]["threads"]: r["compute"] for r in results.values()}
    runs = {}
    for threads, compute in counts.items():
        key = "plain" if len(counts) == 1 else f"plain/{threads}"
        runs[key] = worker(args, "plain", work, compute)
        for measure in ("measured_rss_mb", "measured_device_mb"):  # the plain loop's peaks, under its key
            if isinstance(runs[key][measure], dict):
                runs[key][measure] = {key: runs[key][measure]["plain"]}
        for result in results.values():
            if result["compute"]["threads"] == threads:
                result["plain_run"] = key
    return runs


def plain_worker(args: argparse.Namespace) -> dict:
    """The same steps in one process: Hugging Face `generate`, the rewards, GRPO's clipped loss averaged over tokens
    and a fused AdamW step, on fp32 weights computing in the trainer's dtype (autocast where it is narrower), as
    verl's FSDP mixed precision does. Where the rollout dtype is narrower, generation runs on a copy in it that each
    step's weights are copied into (its seconds are the plain loop's sync)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trinity.runtime.roles.base import peak_rss_mb

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    folder, device = args.work / "model", torch.device(args.device)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa").to(device)
    rollout = getattr(torch, args.rollout_dtype)
    generator = model if rollout == torch.float32 else AutoModelForCausalLM.from_pretrained(folder, dtype=rollout)
    generator = generator.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01, fused=True)
    rows, parts = problems(args.work), {"update_s": [], "generate_s": [], "sync_s": [], "tokens": [], "ends": []}
    for step in range(args.steps):
        batch = rows[step * args.prompts : (step + 1) * args.prompts]
        for key, value in plain_step(args, model, generator, tokenizer, optimizer, batch).items():
            parts[key].append(value)
        parts["ends"].append(time.perf_counter())
    cuda = device.type == "cuda"
    return {
        "update_s": statistics.median(parts["update_s"]),
        "tokens_per_s": statistics.median(t / s for t, s in zip(parts["tokens"], parts["generate_s"])),
        "sync_s": statistics.median(parts["sync_s"]),
        "step_s": (parts["ends"][-1] - parts["ends"][0]) / (args.steps - 1) if args.steps > 1 else None,
        "measured_rss_mb": {"plain": peak_rss_mb()},
        "measured_device_mb": {"plain": torch.cuda.max_memory_allocated() / MIB} if cuda else "not on a device",
    }


def plain_step(args: argparse.Namespace, model: Any, generator: Any, tokenizer: Any, optimizer: Any, batch: list):
    """One GRPO step; the seconds of its parts and the tokens generated."""
    import torch

    started = time.perf_counter()
    sequences, prompt_mask, width = plain_generate(args, generator, tokenizer, [r["prompt"] for r in batch])
    generated = time.perf_counter()
    texts = tokenizer.batch_decode(sequences[:, width:], skip_special_tokens=True)
    answers = [r["response"] for r in batch for _ in range(args.samples)]
    reward = torch.tensor([float(t.strip() == a) for t, a in zip(texts, answers)], device=sequences.device)
    groups = reward.view(len(batch), args.samples)
    advantages = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + EPS)).view(-1)
    update_started = time.perf_counter()
    plain_update(args, model, optimizer, sequences, prompt_mask, width, advantages)
    synced = time.perf_counter()
    if generator is not model:  # the rollout copy takes the new weights
        with torch.no_grad():
            for mine, theirs in zip(generator.parameters(), model.parameters()):
                mine.copy_(theirs)
    sync = time.perf_counter() - synced
    tokens = sequences[:, width:].numel()
    return {
        "generate_s": generated - started,
        "update_s": synced - update_started,
        "sync_s": sync,
        "tokens": tokens,
    }


def plain_generate(args: argparse.Namespace, model: Any, tokenizer: Any, prompts: list[str]):
    """(sequences, prompt mask, prompt width): `samples` responses of exactly max_tokens per prompt, left-padded."""
    import torch

    tokenizer.padding_side = "left"
    rows = [p for p in prompts for _ in range(args.samples)]
    encoded = tokenizer(rows, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    model.eval()
    with torch.no_grad():
        out = model.generate(
            **encoded,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=args.max_tokens,
            min_new_tokens=args.max_tokens - 1,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    return out, encoded["attention_mask"], encoded["input_ids"].shape[1]


def plain_update(args: argparse.Namespace, model: Any, optimizer: Any, sequences, prompt_mask, width: int, advantages):
    """GRPO's clipped policy loss averaged over tokens (on-policy: the ratio is 1, with the gradient of log p),
    gradients clipped at 1.0, one AdamW step."""
    import torch

    model.train()
    response = sequences[:, width:]
    attention = torch.cat([prompt_mask, torch.ones_like(response)], 1)
    dtype = getattr(torch, args.dtype)
    with torch.autocast(model.device.type, dtype=dtype, enabled=dtype != torch.float32):
        logits = model(sequences, attention_mask=attention).logits[:, width - 1 : -1]
    logp = torch.log_softmax(logits.float(), -1).gather(2, response[:, :, None]).squeeze(2)
    ratio = torch.exp(logp - logp.detach())
    per_token = torch.max(-advantages[:, None] * ratio, -advantages[:, None] * ratio.clamp(1 - CLIP, 1 + CLIP))
    loss = per_token.mean()
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if model.device.type == "cuda":
        torch.cuda.synchronize()


# --- this machine's peak ----------------------------------------------------------------------------------------------


def peak_worker(args: argparse.Namespace) -> dict:
    """The peak FLOP/s of a square matmul in the trainer's dtype on its device: the best of 10 timed loops (the best:
    other processes on the machine only ever slow a loop down)."""
    import torch

    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    n = 2048 if device.type == "cpu" else 8192
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    best, repeats = 0.0, 1
    for trial in range(12):  # the first two find how many matmuls make a loop of about a second, and warm up
        sync()
        started = time.perf_counter()
        for _ in range(repeats):
            a @ b
        sync()
        seconds = time.perf_counter() - started
        if trial < 2:
            repeats = max(1, int(repeats / seconds))
        else:
            best = max(best, 2 * n**3 * repeats / seconds)
    return {"flops": best, "matmul": n, "dtype": args.dtype, "device": args.device, "threads": torch.get_num_threads()}


WORKERS = {"build": build_worker, "plain": plain_worker, "peak": peak_worker}


# --- the report -------------------------------------------------------------------------------------------------------


def add_rates(report: dict) -> None:
    """MFU of each update: 6 x parameters x the tokens it computes on, over its seconds and the measured peak."""
    flops = 6 * report["model"]["parameters"] * report["tokens_per_update"]
    for result in report["results"].values():
        result["mfu"] = flops / result["update_s"] / report["peak"]["flops"]


def table(args: argparse.Namespace, report: dict) -> str:
    """The memory table (predicted against measured per role and mode) and the speed table with ratios."""
    results, model = report["results"], report["model"]
    first = next(iter(results.values()))
    lines = [
        f"Qwen2.5-{args.size.upper()} shape, {model['parameters'] / 1e6:.1f} M parameters, random weights; "
        f"{args.steps} GRPO steps of {args.prompts} prompts x {args.samples} samples x {args.max_tokens} tokens; "
        f"{args.engine} engine; {first['compute']['device']} ({first['compute']['dtype']}); "
        f"peak {report['peak']['flops'] / 1e9:.1f} GFLOP/s ({report['peak']['matmul']}^2 matmul, "
        f"{report['peak']['dtype']}); {report['minutes']:.1f} min in all; load average "
        f"{report['load'][0][0]:.1f} at the start, {report['load'][1][0]:.1f} at the end",
        "",
        f"{'peak memory, MiB':24} {'predicted':>10} {'resident':>10} {'measured/predicted':>19} {'device':>12}",
    ]
    lines += [row for mode, r in results.items() for row in memory_rows(mode, r)]
    lines += ["", f"{'':10} {'update s':>9} {'MFU':>7} {'step s':>8} {'gen tok/s':>10} {'sync s':>8} {'minutes':>8}"]
    for mode, r in results.items():
        lines.append(
            f"{mode:10} {r['update_s']:9.2f} {r['mfu']:7.1%} {_num(r['step_s'], 8, 2)} {r['tokens_per_s']:10.1f} "
            f"{r['sync_s']:8.2f} {_num(r.get('minutes'), 8, 1)}"
        )
    lines += ["", *[ratio_line(mode, r, r["plain_run"], results) for mode, r in results.items() if "plain_run" in r]]
    return "\n".join(lines)


def ratio_line(mode: str, ours: dict, key: str, results: dict) -> str:
    """trinity over the plain loop on the same devices (`key`): the update, the step, generation's tokens/s, memory
    (trainer + engine)."""
    plain = results[key]
    memory = sum(ours["measured_rss_mb"].values()) / sum(plain["measured_rss_mb"].values())
    update, step = ours["update_s"] / plain["update_s"], _ratio(ours["step_s"], plain["step_s"])
    tokens = ours["tokens_per_s"] / plain["tokens_per_s"]
    return f"{mode}/{key}: update {update:.2f}x, step {step}, tokens/s {tokens:.2f}x, memory {memory:.2f}x"


def memory_rows(mode: str, result: dict) -> list[str]:
    """Per role: predicted, peak resident memory, measured/predicted, peak device memory. The prediction is of the
    memory the role's tensors live in: resident memory on the CPU, the device's on an accelerator."""
    device = result["measured_device_mb"]
    on_host = result.get("compute", {}).get("device", "cpu") == "cpu"
    rows = []
    for role, rss in result["measured_rss_mb"].items():
        need = result.get("predicted_mb", {}).get(role)
        peak = device.get(role) if isinstance(device, dict) else None
        said = device if isinstance(device, str) else "not reported"
        on_device = f"{peak:12.0f}" if peak is not None else f"{said:>12}"
        measured = rss if on_host else peak
        ratio = f"{measured / need:19.2f}" if need and measured else f"{'-':>19}"
        name = mode if role == mode else f"{mode} {'engine' if role == ENGINE_KEY else role}"
        rows.append(f"{name:24} {_num(need, 10, 0)} {rss:10.0f} {ratio} {on_device}")
    return rows


def _num(value: float | None, width: int, digits: int) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def _ratio(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}x" if ours and theirs else "-"


if __name__ == "__main__":
    main()
