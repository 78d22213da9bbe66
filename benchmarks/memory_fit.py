"""Benchmark of the memory fit: what it adds to resolving a config, measured against the resolution in the same run.

1. In one process, every shipped profile x example: the median resolution and the median memory
   check of the resolved config (warm).
2. Cold, in fresh processes (median): after resolving the reference config, the first check with
   its modules imported and the model table read, timed inside the process. Goal: < 5 ms, what the
   check adds to a `trinity config validate` (render itself does not run it).
3. Fresh processes, medians: `trinity config render` against `trinity plan memory` of the same
   config (resolution + imports + table + estimate + printing), as a difference and a ratio.

Bytecode caches are allowed (PYTHONDONTWRITEBYTECODE is dropped), as an installed package has them.

    python benchmarks/memory_fit.py [--repeat N] [--json OUT]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from config_render import REFERENCE, fresh_process_median, print_report  # noqa: E402

COLD = f"""
import os, sys, time
os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
sys.path.insert(0, {str(REPO)!r})
import json  # the CLI has it already
from trinity.config.compose import Request
from trinity.config.resolve import resolve
resolved = resolve(Request(__import__("pathlib").Path({str(REFERENCE)!r}), ("hardware=ascend910b",)))
start = time.perf_counter()
from trinity.config.memory import memory_check
memory_check(resolved)
print((time.perf_counter() - start) * 1e3)
"""


def cold_check_ms(repeat: int) -> float:
    """Median over fresh processes of the first check, imports and table included, timed inside the process."""
    subprocess.run([sys.executable, "-c", COLD], capture_output=True, check=True)  # writes the bytecode caches
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, check=True).stdout)
        for _ in range(repeat)
    )


def in_process(repeat: int) -> dict:
    """Median resolve and median (warm) memory check per config."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")  # as the CLI does
    from trinity import paths
    from trinity.config.compose import Request
    from trinity.config.profiles import available
    from trinity.config.resolve import resolve
    from trinity.errors import ConfigError

    pairs = [
        (e, p) for e in sorted(paths.data_dir("examples").rglob("*.yaml")) for p in available(paths.profile_dirs())
    ]
    resolved, resolve_times = [], []
    for _ in range(repeat):
        for example, profile in pairs:
            start = time.perf_counter()
            try:
                resolved.append(resolve(Request(example, (f"hardware={profile}",))))
            except ConfigError:
                pass  # a pair the example is not meant for
            resolve_times.append(time.perf_counter() - start)
    from trinity.config.memory import memory_check

    memory_check(resolved[0])
    check_times = []
    for item in resolved:
        start = time.perf_counter()
        memory_check(item)
        check_times.append(time.perf_counter() - start)
    return {
        "configs": len(resolved),
        "resolve_median_ms": statistics.median(resolve_times[1:]) * 1e3,
        "check_median_ms": statistics.median(check_times) * 1e3,
        "check_max_ms": max(check_times) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    inside = in_process(max(2, args.repeat // 3))
    cold = cold_check_ms(args.repeat)
    head = [sys.executable, "-m", "trinity"]
    config = ["--config", str(REFERENCE), "hardware=ascend910b"]
    render = fresh_process_median([*head, "config", "render", *config], args.repeat)
    plan = fresh_process_median([*head, "plan", "memory", *config], args.repeat)
    report = {
        "configs_checked": inside["configs"],
        "resolve_median_ms": round(inside["resolve_median_ms"], 2),
        "check_median_ms": round(inside["check_median_ms"], 3),
        "check_max_ms": round(inside["check_max_ms"], 3),
        "check_over_resolve": round(inside["check_median_ms"] / inside["resolve_median_ms"], 4),
        "check_cold_in_fresh_process_ms": round(cold, 2),
        "render_process_ms": round(render * 1e3, 1),
        "plan_memory_process_ms": round(plan * 1e3, 1),
        "plan_minus_render_ms": round((plan - render) * 1e3, 1),
        "plan_over_render": round(plan / render, 3),
        "goal_added_ms": 5,
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
