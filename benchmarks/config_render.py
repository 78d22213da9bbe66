"""Benchmark of the config path, as ratios against baselines measured in the same run.

1. `trinity config render` of the reference config in a fresh process, against the floor
   `python -c "import hydra; from pydantic import BaseModel"`: the median of N fresh processes each, run
   alternately (render, floor, render, floor, ...) so that a change in the machine's load falls on both.
   Goal: <= 1.5x; above it the report says FAIL and the exit status is 1.
2. Resolution in one process of every shipped profile x example, repeated. Goal: < 20 ms per
   resolved config after the first.

    python benchmarks/config_render.py [--repeat N] [--json OUT]

A benchmark, not a test: on a shared machine read the load (printed) beside the ratio. Python compiles trinity's
modules anew in every process where it may not write their bytecode (PYTHONDONTWRITEBYTECODE, a read-only tree):
that costs the render, not the floor, some 60 ms; `trinity_bytecode_cached` says which case was measured.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "examples" / "grpo_gsm8k" / "gsm8k.yaml"
FLOOR = "import hydra; from pydantic import BaseModel"
RENDER_GOAL = 1.5


def fresh_process_median(cmd: list[str], repeat: int) -> float:
    """Median wall time of `cmd` in new processes, after one warm-up run (file cache)."""
    subprocess.run(cmd, capture_output=True, cwd=REPO)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, cwd=REPO)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.decode()}")
    return statistics.median(times)


def alternating_medians(cmds: dict[str, list[str]], repeat: int) -> dict[str, float]:
    """Median wall time of each command in new processes, the commands taking turns (a, b, a, b, ...), after one
    warm-up run of each (file cache)."""
    for cmd in cmds.values():
        subprocess.run(cmd, capture_output=True, cwd=REPO)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(repeat):
        for name, cmd in cmds.items():
            start = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, cwd=REPO)
            times[name].append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.decode()}")
    return {name: statistics.median(values) for name, values in times.items()}


def bytecode_cached() -> bool:
    """Whether a fresh process finds trinity's compiled modules instead of compiling them."""
    from importlib.util import cache_from_source

    source = REPO / "trinity" / "config" / "resolve.py"
    compiled = Path(cache_from_source(str(source)))
    return compiled.exists() and compiled.stat().st_mtime >= source.stat().st_mtime


def render_cmd() -> list[str]:
    script = shutil.which("trinity")
    head = [script] if script else [sys.executable, "-m", "trinity"]
    return [*head, "config", "render", "--config", str(REFERENCE), "+hardware=ascend910b"]


def in_process(repeat: int) -> dict:
    """First resolution (cold caches) and the median of the rest, over every profile x example."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")  # as the CLI does
    from trinity import paths
    from trinity.config.compose import Request
    from trinity.config.profiles import available
    from trinity.config.resolve import resolve

    examples = sorted(paths.data_dir("examples").rglob("*.yaml"))
    profiles = list(available(paths.profile_dirs()))
    pairs = [(e, p) for e in examples for p in profiles]
    times = []
    for _ in range(repeat):
        for example, profile in pairs:
            start = time.perf_counter()
            try:
                resolve(Request(example, (f"hardware={profile}",)))
            except Exception:  # a pair the example is not meant for still costs a full resolution
                pass
            times.append(time.perf_counter() - start)
    return {
        "pairs": len(pairs),
        "first_ms": times[0] * 1e3,
        "median_after_first_ms": statistics.median(times[1:]) * 1e3,
    }


def print_report(report: dict, json_path: Path | None) -> None:
    """One line per number; with --json also the numbers as a file (written atomically)."""
    for key, value in report.items():
        print(f"{key:32} {value}")
    if json_path:
        from trinity.utils.atomic import write_text_atomic

        write_text_atomic(json_path, json.dumps(report, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="fresh processes of each command (default: 10)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    medians = alternating_medians({"render": render_cmd(), "floor": [sys.executable, "-c", FLOOR]}, args.repeat)
    render, floor = medians["render"], medians["floor"]
    ratio = render / floor
    resolved = in_process(max(2, args.repeat // 3))
    report = {
        "load_average_1min": round(load, 2),
        "trinity_bytecode_cached": bytecode_cached(),
        "floor_import_hydra_basemodel_ms": round(floor * 1e3, 1),
        "render_reference_ms": round(render * 1e3, 1),
        "render_over_floor": round(ratio, 2),
        "render_goal": RENDER_GOAL,
        "render_verdict": "ok" if ratio <= RENDER_GOAL else "FAIL",
        "resolve_pairs": resolved["pairs"],
        "resolve_first_ms": round(resolved["first_ms"], 1),
        "resolve_median_after_first_ms": round(resolved["median_after_first_ms"], 2),
        "resolve_goal_ms": 20,
    }
    print_report(report, args.json)
    if ratio > RENDER_GOAL:
        print(f"FAIL: render is {ratio:.2f}x the floor, above the goal of {RENDER_GOAL}x", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
