"""Building and checking the launch plan for 1, 16, 256 and 1024 nodes x 16 devices.

Reported per node (it must grow linearly) and against Ray's own time to create and place the same
placement groups, measured in the same run on a local Ray whose node declares the devices.

    python benchmarks/launch_plan.py [--repeat N] [--ray-nodes 16]
"""

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.launch.feasibility import check  # noqa: E402
from trinity.launch.plan import build_plan  # noqa: E402
from trinity.launch.reconcile import Node  # noqa: E402

PER_NODE = 16
RUN = "model:\n  model_path: /m\nexplorer:\n  rollout_model:\n    engine_num: {engines}\n    tensor_parallel_size: 2\n"


def config_for(nodes: int, folder: Path):
    """Half of the devices roll out (TP 2 engines), the other half train."""
    path = folder / f"run{nodes}.yaml"
    rollout = max(PER_NODE // 2, nodes * PER_NODE // 2) if nodes > 1 else PER_NODE // 2
    path.write_text(RUN.format(engines=rollout // 2))
    return resolve(Request(path, ("hardware=ascend910c", f"cluster.node_num={nodes}"))).config


def cluster(nodes: int) -> list[Node]:
    return [Node(f"node{i:05d}", {"NPU": PER_NODE, "CPU": 64}) for i in range(nodes)]


def time_plan(config, nodes: list[Node], repeat: int, collect: bool = True) -> float:
    """Median time of build + check; collect=False pauses Python's cyclic GC, whose full passes
    scan every object the process holds (imports included) and blur the algorithm's own growth."""
    times = []
    for _ in range(repeat):
        gc.collect()
        if not collect:
            gc.disable()
        start = time.perf_counter()
        result = check(build_plan(config, exported={}), nodes)
        times.append(time.perf_counter() - start)
        gc.enable()
        assert result.ok, result.lines
    return statistics.median(times)


def time_ray(config) -> float:
    """Ray creating the same groups on one local node that declares all the devices."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    plan = build_plan(config, exported={})
    npus = sum(pg.total().get("NPU", 0) for pg in plan.placement_groups)
    cpus = sum(pg.total().get("CPU", 0) for pg in plan.placement_groups)
    ray.init(num_cpus=int(cpus) + 2, resources={"NPU": npus}, include_dashboard=False, log_to_driver=False)
    try:
        start = time.perf_counter()
        groups = [placement_group([dict(b) for b in pg.bundles], strategy="PACK") for pg in plan.placement_groups]
        ray.get([g.ready() for g in groups], timeout=300)
        elapsed = time.perf_counter() - start
        for g in groups:
            remove_placement_group(g)
        return elapsed
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ray-nodes", type=int, default=16, help="plan size Ray places for the baseline (0 skips it)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results, pure = {}, {}
        for nodes in (1, 16, 256, 1024):
            config = config_for(nodes, Path(tmp))
            plan = build_plan(config, exported={})
            results[nodes] = time_plan(config, cluster(nodes), args.repeat)
            pure[nodes] = time_plan(config, cluster(nodes), args.repeat, collect=False)
            bundles = sum(len(pg.bundles) for pg in plan.placement_groups)
            print(
                f"{nodes:5} nodes: {len(plan.placement_groups):4} groups, {bundles:6} bundles, {len(plan.actors):6} "
                "actors: "
                f"plan+check {results[nodes] * 1e3:7.2f} ms ({results[nodes] / nodes * 1e6:5.1f} us/node); "
                f"GC paused {pure[nodes] * 1e3:7.2f} ms ({pure[nodes] / nodes * 1e6:5.1f} us/node)"
            )
        print(
            f"growth 16 -> 1024 nodes (64x): {results[1024] / results[16]:.1f}x; GC paused {pure[1024] / pure[16]:.1f}x"
        )
        if args.ray_nodes:
            ray_s = time_ray(config_for(args.ray_nodes, Path(tmp)))
            ours = results.get(args.ray_nodes) or time_plan(
                config_for(args.ray_nodes, Path(tmp)), cluster(args.ray_nodes), args.repeat
            )
            print(
                f"Ray placing the {args.ray_nodes}-node plan's groups: {ray_s * 1e3:.0f} ms; plan+check: "
                f"{ours * 1e3:.2f} ms = {ours / ray_s:.4f}x of Ray"
            )


if __name__ == "__main__":
    main()
