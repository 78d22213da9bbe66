"""Benchmark of the vLLM rollout engine; each number against a baseline measured in the same run.

1. overhead: wall time of one warm batch (--prompts prompts x --samples samples, --tokens tokens each,
   all generated to full length) through trinity's `VllmEngine.generate`, the requests sent
   concurrently as the explorer sends them, against vLLM's own `AsyncLLM.generate` with the same
   engine arguments (`vllm_args.engine_kwargs`) and sampling parameters on the same model
   (goal: engine / bare <= 1.15x);
2. sync: seconds per weight sync of a ~30 M-parameter Qwen2 from a trainer process over trinity's
   weight-sync group (`group.join` + `group.send` on the trainer, `join_sync_group` +
   `receive_weights` on the engine: broadcast, vLLM's layer-wise reload, prefix-cache reset) against
   a plain torch.distributed gloo broadcast of the same tensors between two processes (goal <= 1.2x).
   Afterwards the engine's greedy output is compared, token by token, with a Hugging Face forward
   pass (teacher-forced argmax) of the weights sent and of the weights it started with: a correct sync
   matches the first and, as a rule, not the second;
3. engines: tokens/s of the vLLM engine against trinity's transformers engine (same interface,
   same batch) for the demo's model and the ~30 M one; vllm / transformers > 1 means vLLM is faster.

    python benchmarks/vllm_engine.py [--parts overhead,sync,engines] [--prompts P] [--samples N] [--tokens T]
        [--warmup W] [--overhead-repeat N] [--repeat N] [--sync-repeat N] [--dtype float32|bfloat16]
        [--overhead-model demo|big] [--json] [--verbose]

How to read it: every measurement runs in a process of its own, one after the other, so no two engines
share the cores. A time is the median of the passes after --warmup warm-up passes (of the syncs after the
first); each is listed too ("warm-up | warm"), and a second ratio of the fastest passes is the one to
trust when the cores are busy with other work (the load average is printed). Nothing asserts on time:
read the ratios against their goals. vLLM runs with the CPU profile's core binding
(hardware.rollout_core_binding); set VLLM_CPU_OMP_THREADS_BIND yourself to try another. Models are
built locally (the demo's tokenizer, Qwen2 weights from a seed); nothing is downloaded. Each process's
output goes to a log file under the printed folder (--verbose: to the terminal).
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

BIG_SHAPE = dict(
    hidden_size=512,
    intermediate_size=1408,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=8,
    max_position_embeddings=64,
)
BIG_VOCAB = 32000
MAX_MODEL_LEN = 32  # the demo model's max_position_embeddings: prompts of 6 tokens + up to 26 generated
CHECK_PROMPTS, CHECK_TOKENS = 4, 8
TIMEOUT_S = 900


@dataclass(frozen=True)
class Batch:
    """What one pass generates: `prompts` prompts x `samples` samples of exactly `tokens` tokens."""

    prompts: int
    samples: int
    tokens: int


# --- models and configs ------------------------------------------------------------------------------


def build_models(root: Path) -> dict[str, Path]:
    """The demo's model, a ~30 M Qwen2 with the demo's tokenizer, and that model with other weights (what the trainer
    sends)."""
    from transformers.utils import logging

    from trinity import demo

    logging.disable_progress_bar()
    demo.build(root)
    return {
        "demo": root / "model",
        "big": big_model(root, "model_big", 0),
        "big_v2": big_model(root, "model_big_v2", 1),
    }


def big_model(root: Path, name: str, seed: int) -> Path:
    """BIG_SHAPE with tied embeddings, its weights drawn from `seed`, saved beside the demo's model."""
    from transformers import AutoTokenizer

    from trinity.demo import save_model

    folder = root / name
    if not folder.exists():
        save_model(folder, AutoTokenizer.from_pretrained(root / "model"), BIG_SHAPE, seed, BIG_VOCAB)
    return folder


def config_for(model: Path, engine_type: str, dtype: str):
    """The CPU profile's resolved grpo stage of the demo, with `model` as the model and `engine_type` as the rollout
    engine."""
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve

    os.environ["TRINITY_DEMO_DIR"] = str(model.parent)
    overrides = (
        "hardware=cpu",
        f"model.model_path={model}",
        f"explorer.rollout_model.engine_type={engine_type}",
        f"explorer.rollout_model.dtype={dtype}",
        f"explorer.rollout_model.max_model_len={MAX_MODEL_LEN}",
    )
    return resolve(Request(None, overrides)).stage("grpo")


def prompts(model: Path, count: int) -> list[list[int]]:
    """`count` addition prompts (`a+b=`, 6 tokens each) as token ids of the demo's tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    return [tokenizer(f"{a % 90 + 10}+{a % 83 + 10}=", add_special_tokens=False)["input_ids"] for a in range(count)]


LOGS: dict = {"dir": None}  # where each measurement's process writes its output (None: to this terminal)


def in_process(target, *args):
    """`target(*args)` in a fresh spawned process (so engines never share cores or state); returns its result."""
    ctx = multiprocessing.get_context("spawn")
    out, log = ctx.Queue(), _log_path(target.__name__)
    started = time.perf_counter()
    proc = ctx.Process(target=_run_and_put, args=(out, log, target, args))
    proc.start()
    try:
        ok, value = out.get(timeout=TIMEOUT_S)
    finally:
        proc.join(60)
    if not ok:
        raise RuntimeError(f"{target.__name__} failed (log: {log}):\n{value}")
    print(f"[{time.perf_counter() - started:5.1f} s] {target.__name__}: {_brief(value)}", file=sys.stderr, flush=True)
    return value


def _log_path(name: str):
    if LOGS["dir"] is None:
        return None
    LOGS["dir"].mkdir(parents=True, exist_ok=True)
    return LOGS["dir"] / f"{len(list(LOGS['dir'].iterdir())):02d}-{name}.log"


def _brief(value: dict) -> str:
    def shown(v):
        return (
            f"{v:.3g}"
            if isinstance(v, float)
            else "[" + " ".join(map(shown, v)) + "]"
            if isinstance(v, list)
            else str(v)
        )

    return ", ".join(f"{k}={shown(v)}" for k, v in value.items() if k != "greedy")


def _run_and_put(out, log, target, args) -> None:
    import traceback

    if log is not None:  # vLLM's own processes inherit these descriptors
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    try:
        out.put((True, target(*args)))
    except BaseException:  # the parent reports it
        out.put((False, traceback.format_exc()))


def timing(times: list[float], warmup: int) -> dict:
    """Median and fastest of the passes after the first `warmup` (all of them when none is left), and every pass as
    text."""
    warm = times[warmup:] or times
    shown = " ".join(f"{t:.3g}" for t in times[:warmup]) + " | " + " ".join(f"{t:.3g}" for t in times[warmup:])
    return {"median": statistics.median(warm), "fastest": min(warm), "passes": shown}


# --- generating ----------------------------------------------------------------------------------------


def vllm_engine_pass(model: Path, dtype: str, batch: Batch, passes: int) -> dict:
    """Seconds per warm pass of `batch` as concurrent `VllmEngine.generate` calls, and the tokens generated."""
    return asyncio.run(_engine_pass("vllm", model, dtype, batch, passes))


def transformers_engine_pass(model: Path, dtype: str, batch: Batch, passes: int) -> dict:
    """The same through trinity's TransformersEngine."""
    return asyncio.run(_engine_pass("transformers", model, dtype, batch, passes))


async def _engine_pass(engine_type: str, model: Path, dtype: str, batch: Batch, passes: int) -> dict:
    from trinity.runtime.rollout.base import Sampling

    engine = make_engine(engine_type, config_for(model, engine_type, dtype))
    await engine.setup(str(model), 0)
    sampling = Sampling(1.0, 1.0, -1, batch.tokens, batch.tokens)
    rows = prompts(model, batch.prompts)
    times, tokens = [], 0
    try:
        for _ in range(passes):
            started = time.perf_counter()
            results = await asyncio.gather(*(engine.generate(p, batch.samples, sampling) for p in rows))
            times.append(time.perf_counter() - started)
            tokens = sum(len(s.response_ids) for _, samples in results for s in samples)
    finally:
        engine.close()
    return {"times": times, "tokens": tokens}


def make_engine(engine_type: str, config):
    """A rollout engine of `engine_type`, constructed as the launch plan constructs rollout.engine0."""
    from trinity.runtime.rollout import engine_class

    return engine_class(engine_type)(name="rollout.engine0", role="rollout", config=config, index=0)


def bare_vllm_pass(model: Path, dtype: str, batch: Batch, passes: int) -> dict:
    """Seconds per warm pass of `batch` through vLLM's AsyncLLM directly, with the engine's arguments, env and sampling
    parameters."""
    return asyncio.run(_bare_pass(model, dtype, batch, passes))


async def _bare_pass(model: Path, dtype: str, batch: Batch, passes: int) -> dict:
    from trinity.runtime.rollout.vllm_args import ENGINE_ENV, engine_env, engine_kwargs, topology

    config = config_for(model, "vllm", dtype)
    topo = topology(config, 0)
    for name, value in (ENGINE_ENV | engine_env(config, topo)).items():
        os.environ.setdefault(name, value)
    from vllm import AsyncEngineArgs, SamplingParams
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_kwargs(config, str(model), topo)))
    params = SamplingParams(
        n=batch.samples,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_tokens=batch.tokens,
        min_tokens=batch.tokens,
        repetition_penalty=1.0,
        logprobs=0,
        output_kind=RequestOutputKind.FINAL_ONLY,
    )
    rows = prompts(model, batch.prompts)
    times, tokens = [], 0
    try:
        for i in range(passes):
            started = time.perf_counter()
            outputs = await asyncio.gather(*(_final(llm, p, params, f"{i}-{j}") for j, p in enumerate(rows)))
            times.append(time.perf_counter() - started)
            tokens = sum(len(c.token_ids) for out in outputs for c in out.outputs)
    finally:
        llm.shutdown()
        del llm  # now, not in vLLM's __del__ at interpreter exit (which fails there)
    return {"times": times, "tokens": tokens}


async def _final(llm, prompt_ids: list[int], params, request_id: str):
    final = None
    async for output in llm.generate({"prompt_token_ids": prompt_ids}, params, request_id=request_id):
        final = output
    return final


# --- weight sync -----------------------------------------------------------------------------------------


def sent_tensors(weights: Path, dtype: str) -> list[tuple[str, "object"]]:
    """(name, tensor) of every tensor in the model's safetensors file, in the rollout dtype: what the trainer sends."""
    import torch
    from safetensors.torch import load_file

    return [
        (name, t.to(getattr(torch, dtype)).contiguous())
        for name, t in load_file(str(weights / "model.safetensors")).items()
    ]


def _plain_member(rank: int, port: int, weights: Path, dtype: str, rounds: int, out) -> None:
    from plain_broadcast import broadcast_times

    times = broadcast_times(rank, port, [t for _, t in sent_tensors(weights, dtype)], rounds)
    if rank == 1:
        out.put(times)


def plain_broadcast(weights: Path, dtype: str, rounds: int) -> dict:
    """Seconds for the receiver of a plain gloo broadcast of every tensor between two bare processes (median of the warm
    rounds)."""
    from trinity.runtime.sync.group import free_port

    ctx = multiprocessing.get_context("spawn")
    out, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=_plain_member, args=(r, port, weights, dtype, rounds, out)) for r in range(2)]
    for p in procs:
        p.start()
    times = out.get(timeout=TIMEOUT_S)
    for p in procs:
        p.join(60)
    return {"times": times}


def _trainer(port: int, weights: Path, dtype: str, rounds: int, go, done) -> None:
    """Trainer rank 0: hosts the weight-sync group, then sends every tensor (in the group's buckets) each time `go`
    says so; puts its seconds in `done`."""
    import torch

    from trinity.runtime.sync import group

    torch.set_num_threads(1)
    sync_group = group.join("gloo", "127.0.0.1", port, 0, 2, 60)
    tensors = [t for _, t in sent_tensors(weights, dtype)]
    for _ in range(rounds):
        go.get(timeout=TIMEOUT_S)
        started = time.perf_counter()
        group.send(sync_group, tensors)
        done.put(time.perf_counter() - started)


def engine_sync(model: Path, weights: Path, dtype: str, rounds: int) -> dict:
    """Seconds per `receive_weights` of `weights` into a VllmEngine started on `model`, fed by a trainer process; then
    the engine's greedy output."""
    from trinity.runtime.sync.group import free_port

    ctx = multiprocessing.get_context("spawn")
    go, done, port = ctx.Queue(), ctx.Queue(), free_port()
    trainer = ctx.Process(target=_trainer, args=(port, weights, dtype, rounds, go, done))
    trainer.start()
    try:
        return asyncio.run(_receive(model, weights, dtype, rounds, port, go, done))
    finally:
        trainer.join(60)


async def _receive(model: Path, weights: Path, dtype: str, rounds: int, port: int, go, done) -> dict:
    from trinity.runtime.rollout.base import Sampling, WeightSpec

    engine = make_engine("vllm", config_for(model, "vllm", dtype))
    await engine.setup(str(model), 0)
    try:
        started = time.perf_counter()
        await engine.join_sync_group("gloo", "127.0.0.1", port, 1, 2, 60)
        join_s = time.perf_counter() - started
        specs = [WeightSpec(name, tuple(t.shape), dtype) for name, t in sent_tensors(weights, dtype)]
        times, broadcast = [], []
        for version in range(1, rounds + 1):
            go.put(version)
            started = time.perf_counter()
            await engine.receive_weights(specs, version)
            times.append(time.perf_counter() - started)
            broadcast.append(done.get(timeout=TIMEOUT_S))
        greedy = Sampling(temperature=0.0, max_tokens=CHECK_TOKENS)
        outputs = [await engine.generate(p, 1, greedy) for p in prompts(model, CHECK_PROMPTS)]
    finally:
        engine.close()
    return {
        "times": times,
        "broadcast": broadcast,
        "join_s": join_s,
        "tensors": len(specs),
        "greedy": [samples[0].response_ids for _, samples in outputs],
    }


def teacher_forced_matches(model: Path, dtype: str, responses: list[list[int]]) -> int:
    """How many of `responses` (to the check prompts) are, token by token, the argmax of a Hugging Face forward pass of
    `model`."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()
    hf = AutoModelForCausalLM.from_pretrained(model, dtype=getattr(torch, dtype)).eval()
    matches = 0
    for prompt, response in zip(prompts(model, len(responses)), responses):
        ids = torch.tensor([prompt + response])
        with torch.no_grad():
            logits = hf(input_ids=ids).logits[0]
        argmax = logits[len(prompt) - 1 : -1].argmax(-1).tolist()
        matches += argmax == response
    return matches


# --- the run -----------------------------------------------------------------------------------------------


def overhead_rows(model: Path, label: str, dtype: str, batch: Batch, warmup: int, passes: int, cache: dict) -> list:
    """Benchmark 1: VllmEngine against bare AsyncLLM on the same batch."""
    bare = in_process(bare_vllm_pass, model, dtype, batch, passes)
    ours = cached(cache, ("vllm", label), vllm_engine_pass, model, dtype, batch, passes)
    b, o = timing(bare["times"], warmup), timing(ours["times"], warmup)
    return [
        (f"overhead_{label}_bare_asyncllm_s", b["median"]),
        (f"overhead_{label}_vllm_engine_s", o["median"]),
        (f"overhead_{label}_ratio engine/bare (goal <= 1.15)", o["median"] / b["median"]),
        (f"overhead_{label}_ratio engine/bare, fastest passes", o["fastest"] / b["fastest"]),
        (f"overhead_{label}_bare_passes_s (warm-up | warm)", b["passes"]),
        (f"overhead_{label}_engine_passes_s (warm-up | warm)", o["passes"]),
        (f"overhead_{label}_tokens (bare / engine)", f"{bare['tokens']} / {ours['tokens']}"),
    ]


def sync_rows(models: dict[str, Path], dtype: str, syncs: int) -> list:
    """Benchmark 2: trinity's weight sync into vLLM against a plain broadcast, then the greedy-output check."""
    mib = sum(t.numel() * t.element_size() for _, t in sent_tensors(models["big_v2"], dtype)) / 2**20
    plain = in_process(plain_broadcast, models["big_v2"], dtype, syncs + 1)
    ours = in_process(engine_sync, models["big"], models["big_v2"], dtype, syncs + 1)
    p, o = timing(plain["times"], 1), timing(ours["times"], 1)
    sent = teacher_forced_matches(models["big_v2"], dtype, ours["greedy"])
    before = teacher_forced_matches(models["big"], dtype, ours["greedy"])
    return [
        (f"sync_big_plain_broadcast_s ({mib:.0f} MiB, {ours['tensors']} tensors)", p["median"]),
        ("sync_big_trinity_receive_weights_s", o["median"]),
        ("sync_big_ratio trinity/plain (goal <= 1.2)", o["median"] / p["median"]),
        ("sync_big_ratio trinity/plain, fastest syncs", o["fastest"] / p["fastest"]),
        ("sync_big_plain_s (first | warm)", p["passes"]),
        ("sync_big_trinity_s (first | warm)", o["passes"]),
        (
            "sync_big_trinity_trainer_side_s (first | warm; waits on the layer-wise reload)",
            timing(ours["broadcast"], 1)["passes"],
        ),
        ("sync_big_join_sync_group_s", ours["join_s"]),
        (
            f"sync_big_greedy_equals_hf_argmax_of_sent_weights (of {CHECK_PROMPTS})",
            f"{sent} {'MATCH' if sent == CHECK_PROMPTS else 'MISMATCH'}",
        ),
        (f"sync_big_greedy_equals_hf_argmax_of_old_weights (of {CHECK_PROMPTS})", f"{before}"),
    ]


def engines_rows(models: dict[str, Path], dtype: str, batch: Batch, warmup: int, passes: int, cache: dict) -> list:
    """Benchmark 3: tokens/s of the vLLM engine against the transformers engine, per model size."""
    rows = []
    for label in ("demo", "big"):
        hf = in_process(transformers_engine_pass, models[label], dtype, batch, passes)
        ours = cached(cache, ("vllm", label), vllm_engine_pass, models[label], dtype, batch, passes)
        hf_rate, vllm_rate = (
            hf["tokens"] / timing(hf["times"], warmup)["median"],
            ours["tokens"] / timing(ours["times"], warmup)["median"],
        )
        rows += [
            (f"engines_{label}_transformers_tokens_per_s", hf_rate),
            (f"engines_{label}_vllm_tokens_per_s", vllm_rate),
            (f"engines_{label}_ratio vllm/transformers", vllm_rate / hf_rate),
            (f"engines_{label}_transformers_passes_s (warm-up | warm)", timing(hf["times"], warmup)["passes"]),
        ]
    return rows


def cached(cache: dict, key: tuple, target, *args) -> dict:
    """`in_process(target, *args)`, measured once per run for each key (benchmarks 1 and 3 share the vLLM engine's
    pass)."""
    if key not in cache:
        cache[key] = in_process(target, *args)
    return cache[key]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts", default="overhead,sync,engines", help="which benchmarks to run (default: overhead,sync,engines)"
    )
    parser.add_argument(
        "--warmup", type=int, default=1, help="generate passes left out of each measurement (default 1)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="warm generate passes per measurement of benchmark 3; the median is reported (default 3)",
    )
    parser.add_argument(
        "--overhead-repeat",
        type=int,
        default=8,
        help="warm generate passes per measurement of benchmark 1 (default 8: its passes take about a second)",
    )
    parser.add_argument("--sync-repeat", type=int, default=3, help="warm weight syncs, after a first one (default 3)")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument(
        "--overhead-model",
        default="demo",
        choices=("demo", "big"),
        help="the model of benchmark 1 (default: the demo's)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object instead of a table")
    parser.add_argument(
        "--verbose", action="store_true", help="show vLLM's output instead of writing it to a log file per measurement"
    )
    args = parser.parse_args()
    if args.tokens + 6 > MAX_MODEL_LEN:
        parser.error(f"--tokens must leave room for the 6-token prompts in {MAX_MODEL_LEN} positions")
    started, load = time.perf_counter(), os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="vllm-bench-"))
    LOGS["dir"] = None if args.verbose else work / "logs"
    print(f"models and logs under {work}", file=sys.stderr)
    models = build_models(work / "demo")
    batch, passes, parts, cache, rows = (
        Batch(args.prompts, args.samples, args.tokens),
        args.warmup + args.repeat,
        args.parts.split(","),
        {},
        [],
    )
    if "overhead" in parts:
        rows += overhead_rows(
            models[args.overhead_model],
            args.overhead_model,
            args.dtype,
            batch,
            args.warmup,
            args.warmup + args.overhead_repeat,
            cache,
        )
    if "sync" in parts:
        rows += sync_rows(models, args.dtype, args.sync_repeat)
    if "engines" in parts:
        rows += engines_rows(models, args.dtype, batch, args.warmup, passes, cache)
    rows += [
        (
            "load_average_1min (start / end; other work on the cores skews every ratio)",
            f"{load:.2f} / {os.getloadavg()[0]:.2f}",
        ),
        ("total_wall_s", time.perf_counter() - started),
    ]
    print_rows(rows, args, batch)


def print_rows(rows: list, args, batch: Batch) -> None:
    """The results as a table (or JSON), headed by what was measured."""
    if args.json:
        print(
            json.dumps(
                {
                    "dtype": args.dtype,
                    "batch": asdict(batch),
                    "warmup": args.warmup,
                    "repeat": args.repeat,
                    "results": dict(rows),
                },
                indent=2,
            )
        )
        return
    print(
        f"# {batch.prompts} prompts x {batch.samples} samples x {batch.tokens} tokens, {args.dtype}; medians of the "
        f"passes after {args.warmup} warm-up ({args.overhead_repeat} in benchmark 1, {args.repeat} in 3) and of "
        f"{args.sync_repeat} syncs after a first"
    )
    for name, value in rows:
        print(f"{name:78} {value:.4g}" if isinstance(value, float) else f"{name:78} {value}")


if __name__ == "__main__":
    main()
