"""Benchmark of the config path, as ratios against baselines measured in the same run.

1. `trinity config render` of the reference config in a fresh process, against the floor
   `python -c "import hydra, pydantic"` (median of repeated fresh processes). Goal: <= 1.5x.
2. Resolution in one process of every shipped profile x example, repeated. Goal: < 20 ms per
   resolved config after the first.

    python benchmarks/config_render.py [--repeat N] [--json OUT]
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
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    floor = fresh_process_median([sys.executable, "-c", "import hydra, pydantic"], args.repeat)
    render = fresh_process_median(render_cmd(), args.repeat)
    resolved = in_process(max(2, args.repeat // 3))
    report = {
        "floor_import_hydra_pydantic_ms": round(floor * 1e3, 1),
        "render_reference_ms": round(render * 1e3, 1),
        "render_over_floor": round(render / floor, 2),
        "render_goal": 1.5,
        "resolve_pairs": resolved["pairs"],
        "resolve_first_ms": round(resolved["first_ms"], 1),
        "resolve_median_after_first_ms": round(resolved["median_after_first_ms"], 2),
        "resolve_goal_ms": 20,
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
