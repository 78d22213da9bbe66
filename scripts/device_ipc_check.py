"""Device IPC on this machine's accelerator as a colocated memory sync uses it (trinity/runtime/sync/device_ipc.py,
runtime/trainer/weights_out.py), in one command, before a colocated run:

    python scripts/device_ipc_check.py [--pieces 4] [--mib 64]

On one device, under Ray: two trainer ranks (Ray actors, given the trainer env of the profile `hardware=auto` picks:
on the GPU profiles expandable_segments:True) and one engine (a Ray actor, sibling of the ranks, given the rollout
env) that starts a process of its own as vLLM's multiprocess executor starts its workers; that process opens every
handle, with the key it builds for its device itself (its node, which its actor recorded, and its physical device).
The ranks export as a colocated sync does: in ordinary segments, only a rank beside an engine worker (the layout of a
colocated run with two trainer devices and one engine device, launch/plan.py `beside_an_engine`), several pieces in
turn, each a new buffer, which the allocator places where the last one was (on NPUs: memory mapped again, what HDK
25.3.RC1 is needed for). It checks:
- every piece reached the engine's process whole, each opened on a key built there;
- the allocator ran ordinary segments at each export, where the profile's env has expandable ones;
- the rank with no engine worker beside it exported nothing, and both ranks hold no more device memory after the
  sync than before it (a handle nobody opens would keep its buffer allocated);
and, as a control that decides nothing, whether a buffer in an expandable segment can be opened by the sibling
(pytorch/pytorch#165685: refused where pidfd_getfd is).
Not here: vLLM (the engine's process is a plain Python process), a second node. Prints one JSON object and exits 0
when every check passed, 1 otherwise (and on a machine without an accelerator, which it says).
"""

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIB = 2**20
SHARE = 0.3  # of the device, for each of the three actors on it
TIMEOUT_S = 90


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pieces", type=int, default=4, help="pieces of one sync, each a new buffer")
    parser.add_argument("--mib", type=int, default=64, help="MiB of each piece")
    parser.add_argument("--reader", action="store_true", help=argparse.SUPPRESS)  # the engine's own process
    args = parser.parse_args(argv)
    if args.reader:
        return reader_process()
    import torch

    if not torch.accelerator.is_available():
        print(json.dumps({"error": "no accelerator here: device IPC needs a GPU or an NPU"}))
        return 1
    report = check(args)
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


def layout() -> tuple:
    """The colocated run this machine would run (hardware=auto): its platform, the env the launcher gives a trainer
    rank and an engine, and which of two trainer ranks sit beside an engine worker when one engine device serves
    them."""
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.launch.plan import beside_an_engine
    from trinity.launch.roles import ROLLOUT, TRAINER
    from trinity.launch.runtime_env import runtime_env
    from trinity.platforms import get_platform

    run = ("hardware=auto", "mode=colocate", "cluster.gpu_per_node=2", "explorer.rollout_model.engine_num=1")
    config = resolve(Request(None, run)).stage("grpo")
    path = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    envs = [runtime_env(config, role)["env_vars"] | path for role in (TRAINER, ROLLOUT)]
    beside = [beside_an_engine(config, rank) for rank in (0, 1)]
    return config, get_platform(config.hardware.device_type), *envs, beside


def check(args: argparse.Namespace) -> dict:
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    config, platform, trainer_env, rollout_env, beside = layout()
    if __name__ != "__main__":  # imported: Ray's workers cannot import it, so its actor classes travel by value
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address="local", include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        bundle = {platform.ray_resource_key: 1, "CPU": 1}
        group = placement_group([bundle], strategy="STRICT_PACK")
        ray.get(group.ready(), timeout=TIMEOUT_S)
        strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=0)
        ask = (
            {"num_gpus": SHARE}
            if platform.ray_request == "num_gpus"
            else {"resources": {platform.ray_resource_key: SHARE}}
        )

        def start(cls, env: dict, *arguments):
            options = {"num_cpus": 0, "scheduling_strategy": strategy, "runtime_env": {"env_vars": env}, **ask}
            return ray.remote(cls).options(**options).remote(*arguments)

        ranks = [start(Rank, trainer_env, r, beside[r], platform.device_type, platform.alloc_conf_env) for r in (0, 1)]
        engine = start(Engine, rollout_env, str(Path(__file__).resolve()), platform.visible_devices_env)
        return run_sync(args, ranks, engine, platform, trainer_env, beside)
    finally:
        ray.shutdown()


def run_sync(args, ranks: list, engine, platform, trainer_env: dict, beside: list) -> dict:
    import ray

    from trinity.platforms import ipc

    get = lambda refs: ray.get(refs, timeout=TIMEOUT_S)  # noqa: E731
    before = get([r.memory.remote() for r in ranks])
    pieces = []
    for index in range(args.pieces):
        exported = get([r.export.remote(index, args.mib) for r in ranks])
        handles = {key: h for e in exported for key, h in e["handles"].items()}
        seen = get(engine.load.remote(handles, args.mib * MIB // 2, index + 1))
        pieces.append({"ranks": [{k: v for k, v in e.items() if k != "handles"} for e in exported], "engine": seen})
    after = get([r.end.remote() for r in ranks])
    control = get(engine.load.remote(get(ranks[0].expandable_export.remote(args.mib)), args.mib * MIB // 2, 7))
    get(ranks[0].end.remote())
    exporting = [rank for rank, yes in enumerate(beside) if yes]
    checks = {
        "pieces_whole_in_the_engines_process": all(p["engine"].get("whole") for p in pieces),
        # the engine's process built the key rank 0 exported under: its node from its actor's record, its device
        "engine_key_built_in_its_process": all(p["engine"].get("key") == p["ranks"][0].get("key") for p in pieces),
        "ordinary_segments_at_export": all(
            e["expandable_at_export"] is False for p in pieces for e in p["ranks"] if e["exported"]
        ),
        "only_ranks_beside_an_engine_export": [any(p["ranks"][r]["exported"] for p in pieces) for r in (0, 1)] == beside
        and exporting == [0],
        "no_device_memory_held_after_the_sync": all(a <= b for a, b in zip(after, before)),
    }
    driver = ipc.driver_release(platform, _probes())
    return {
        "device": platform.device_type,
        "profile_trainer_env": {k: v for k, v in trainer_env.items() if k.endswith("_ALLOC_CONF")},
        "device_ipc_here": ipc.support(platform, driver)._asdict(),
        "ranks_beside_an_engine": beside,
        "device_memory_before_after": {"before": before, "after": after},
        "pieces": pieces,
        "control_expandable_segment_opened_by_a_sibling": control,
        "checks": checks,
        "not_checked_here": [
            "vLLM: the engine's process is a plain Python process that its Ray actor starts, as vLLM's multiprocess "
            "executor starts its workers",
            "a second node: the key's node is this one's",
        ],
        "ok": all(checks.values()),
    }


def _probes():
    from trinity.platforms.detect import Probes

    return Probes()


class Rank:
    """A trainer rank's side of a colocated sync (WeightsOut._export's steps on a buffer of known values)."""

    def __init__(self, rank: int, beside_engine: bool, device_type: str, alloc_conf_env: str | None) -> None:
        import torch

        self.rank, self.beside_engine, self.device_type, self.alloc_conf_env = (
            rank,
            beside_engine,
            device_type,
            alloc_conf_env,
        )
        self.module = torch.get_device_module(device_type)
        self.device = torch.accelerator.current_accelerator()
        self.held, self.restore = None, None

    def memory(self) -> int:
        return int(self.module.memory_allocated())

    def export(self, index: int, mib: int) -> dict:
        import torch

        from trinity.runtime.sync import device_ipc

        if not self.beside_engine:
            return {"rank": self.rank, "exported": False, "handles": {}}
        if index == 0:
            self.restore = device_ipc.ordinary_segments(self.device_type, self.alloc_conf_env)
        live = getattr(torch._C, "_accelerator_getAllocatorSettings", lambda: "")()  # what torch shows of the setting
        self.held = None  # the last piece: the engine has loaded it
        self.held = torch.full((mib * MIB // 2,), float(index + 1), dtype=torch.bfloat16, device=self.device)
        key = device_ipc.device_key(_visible_env(self.device_type), torch.accelerator.current_device_index())
        handles = device_ipc.export(self.held, key)
        expandable = device_ipc.expandable_segments(None)  # torch's live settings alone (torch_npu's may show none)
        answer = {"rank": self.rank, "exported": True, "key": key, "handles": handles}
        return answer | {"expandable_at_export": expandable, "allocator_settings_at_export": live}

    def expandable_export(self, mib: int) -> dict:
        """Control: a buffer allocated with expandable segments on, exported as before the fix."""
        import torch

        from trinity.runtime.sync import device_ipc

        device_ipc.set_allocator(self.device_type, f"{device_ipc.EXPANDABLE}:True")
        self.module.empty_cache()
        self.held = torch.full((mib * MIB // 2,), 7.0, dtype=torch.bfloat16, device=self.device)
        key = device_ipc.device_key(_visible_env(self.device_type), torch.accelerator.current_device_index())
        return device_ipc.export(self.held, key)

    def end(self) -> int:
        """The sync is done: drop the last buffer, free what the engine no longer maps; the memory still allocated."""
        from trinity.runtime.sync import device_ipc

        self.held = None
        if self.restore is not None:
            self.restore()
            self.restore = None
        device_ipc.release(self.device_type)
        self.module.synchronize()
        return self.memory()


class Engine:
    """The engine's actor: it records its node and starts its worker process (this script with --reader), which
    inherits that record, as vLLM's workers inherit what trinity's engine actor records before vLLM starts them."""

    def __init__(self, script: str, visible_env: str | None) -> None:
        from trinity.runtime.sync import device_ipc

        device_ipc.announce_node()
        self.visible_env = visible_env
        self.worker = subprocess.Popen(
            [sys.executable, script, "--reader"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ)
        )

    def load(self, handles: dict, count: int, value: float) -> dict:
        pickle.dump((handles, self.visible_env, count, value), self.worker.stdin)
        self.worker.stdin.flush()
        return pickle.load(self.worker.stdout)


def reader_process() -> int:
    """The engine's worker: opens each piece's handle on its device under the key it builds, checks the values, drops
    the mapping (the exporter's buffer is free to go), answers on stdout."""
    import torch

    from trinity.runtime.sync import device_ipc

    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the pipe
    while True:
        try:
            handles, visible_env, count, value = pickle.load(sys.stdin.buffer)
        except EOFError:
            return 0
        index = torch.accelerator.current_device_index()
        key = device_ipc.device_key(visible_env, index)
        answer = {"key": key, "offered": sorted(handles)}
        started = time.perf_counter()
        try:
            mapped = device_ipc.open_handle(handles, key, index)
            whole = mapped.numel() == count and bool((mapped == value).all())
            answer |= {"whole": whole, "seconds": round(time.perf_counter() - started, 4)}
            del mapped
            torch.accelerator.synchronize()
        except Exception as exc:  # noqa: BLE001 (reported: what the control is for)
            answer |= {"whole": False, "error": f"{type(exc).__name__}: {exc}"[:400]}
        pickle.dump(answer, out)
        out.flush()


def _visible_env(device_type: str) -> str | None:
    from trinity.platforms import get_platform

    return get_platform(device_type).visible_devices_env


if __name__ == "__main__":
    raise SystemExit(main())
