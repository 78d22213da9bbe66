"""The memory a colocated device_ipc sync takes on a trainer rank, measured on the CPU, against `trinity plan memory`'s
prediction (trinity/config/memory/sync.py, trainer_sync_items).

Two real verl trainer ranks (FSDP2 over gloo, each a process of its own) of a Qwen2.5-shaped model (random fp32
weights, no download; the embedded demo's tokenizer), each beside an engine device (colocate, engine_num 2), run one
memory sync through `WeightsOut.piece` with the channel the GPU profiles derive (device_ipc) and the rollout dtype
bf16. What cannot exist on a CPU is stood in for behind the real interface: `device_ipc.export` gives no CUDA handle
and keeps the exported buffer referenced until the next export returns, as an engine whose layer-by-layer reload still
maps it would. On the CPU the device's memory is the process's own, so the sync's peak is the rise of the rank's peak
resident memory (VmHWM, reset through /proc/self/clear_refs) over its resident memory just before the sync.

    python benchmarks/device_ipc_sync.py [--size 0.5b] [--bucket-mib 64]

Reported per rank: measured and predicted MiB, their ratio, and what the prediction was before (2 x the largest piece:
its weights cast, and the flat buffer), which the ranks other than 0 exceeded by keeping the piece's weights in fp32.
Needs ~8 GB of free host memory for 0.5b; a few minutes on 2 cores.
"""

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_sync import build_model  # noqa: E402
from scale import SIZES  # noqa: E402

MIB = 2**20
CATALOG = {"0.5b": "Qwen/Qwen2.5-0.5B-Instruct", "1.5b": "Qwen/Qwen2.5-1.5B-Instruct", "7b": "Qwen/Qwen2.5-7B-Instruct"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="0.5b")
    parser.add_argument("--bucket-mib", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trinity-device-ipc-") as tmp:
        print(json.dumps(run(args, Path(tmp)), indent=2))


def run(args: argparse.Namespace, work: Path) -> dict:
    from trinity import demo
    from trinity.runtime.sync.group import free_port

    demo.build(work / "demo")
    model = build_model(work / "model", work / "demo" / "model", args.size, "float32")
    ctx, port = multiprocessing.get_context("spawn"), free_port()
    out = ctx.Queue()
    ranks = [ctx.Process(target=rank_sync, args=(args, work, model, rank, port, out)) for rank in (0, 1)]
    for proc in ranks:
        proc.start()
    measured = dict(out.get(timeout=1800) for _ in ranks)
    for proc in ranks:
        proc.join(120)
    predicted, before = prediction(args, work)
    return {
        "size": args.size,
        "bucket_mib": args.bucket_mib,
        "predicted_mib": round(predicted / MIB, 1),
        "predicted_before_mib": round(before / MIB, 1),
        "ranks": {
            rank: seen | {"measured_over_predicted": round(seen["sync_peak_mib"] * MIB / predicted, 3)}
            for rank, seen in sorted(measured.items())
        },
    }


def config_for(args: argparse.Namespace, work: Path, model: Path | None = None):
    """The run's GRPO stage: colocate, two trainer ranks each beside an engine device, a bf16 rollout; its channel the
    one the GPU profiles derive (the cpu profile maps no device memory)."""
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve

    os.environ["TRINITY_DEMO_DIR"] = str(work / "demo")
    overrides = [
        "hardware=cpu",
        "mode=colocate",
        "cluster.gpu_per_node=2",
        "explorer.rollout_model.engine_num=2",
        "explorer.rollout_model.dtype=bfloat16",
        f"synchronizer.sync_bucket_mib={args.bucket_mib}",
    ]
    if model is not None:
        overrides.append(f"model.model_path={model}")
    config = resolve(Request(None, tuple(overrides))).stage("grpo")
    return config.model_copy(
        update={"synchronizer": config.synchronizer.model_copy(update={"sync_channel": "device_ipc"})}
    )


def prediction(args: argparse.Namespace, work: Path) -> tuple[int, int]:
    """(what plan memory now says a rank beside an engine holds for the sync, what it said before: 2 pieces)."""
    from trinity.config.memory.catalog import known_models
    from trinity.config.memory.checks import sync_setup
    from trinity.config.memory.sync import trainer_sync_items

    shape = known_models()[CATALOG[args.size]][0]
    sync = sync_setup(config_for(args, work), shape)
    return sum(item.bytes for item in trainer_sync_items(sync, host=False)), 2 * sync.piece


def rank_sync(args: argparse.Namespace, work: Path, model: Path, rank: int, port: int, out) -> None:
    """Trainer rank `rank` of 2: set up, then one device_ipc sync, its peak resident memory measured."""
    import gc

    from trinity.platforms import get_platform
    from trinity.runtime.sync import device_ipc, pieces
    from trinity.runtime.trainer.rank import TrainerRank

    config = config_for(args, work, model)
    os.environ.update(get_platform("cpu").verl_env())
    os.environ[device_ipc.NODE_ENV] = "this-node"  # no Ray here: the node the rank's actor would record
    mapped: list = []  # the buffer an engine still maps

    def export(buffer, key):
        previous = list(mapped)
        mapped[:] = [buffer]
        del previous  # the engine lets the previous buffer go once it has loaded this one
        return {key: b"no handle on a CPU"}

    device_ipc.export = export
    trainer = TrainerRank(name=f"trainer_node0.rank{rank}", role="trainer", config=config, rank=rank, world_size=2)
    trainer.setup("127.0.0.1", port, str(model), 1, None)
    plan = pieces.plan(trainer.weight_specs(), config.synchronizer.bucket_bytes)
    gc.collect()
    before = resident_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak resident memory starts again from here
    for index, piece in enumerate(plan):
        trainer.weight_piece(index, len(piece))
    mapped.clear()
    trainer.end_weight_pieces()
    peak = resident_kib("VmHWM")
    out.put((rank, {"pieces": len(plan), "sync_peak_mib": round((peak - before) / 1024, 1)}))


def resident_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS: resident now; VmHWM: the peak since the last reset)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


if __name__ == "__main__":
    main()
