"""Benchmark of refusing hostile YAML (alias bombs, recursive aliases, deep nesting), as ratios
against validating the reference config in the same process and run. Goal: each refusal costs no
more than an ordinary validation (ratio <= 1), whatever the expansion factor of the bomb.

    python benchmarks/hostile_yaml.py [--repeat N]
"""

import argparse
import contextlib
import io
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trinity.cli.main import main  # noqa: E402

MINIMAL = "model:\n  model_path: /models/tiny\n"


def bomb(width: int, depth: int) -> str:
    """Anchors nesting `depth` levels of `width`-element lists: width**depth strings once expanded."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    return MINIMAL + "\n".join(lines) + "\n"


CASES = {
    "billion_laughs_9x9": bomb(9, 9),
    "bomb_99_wide_20_deep": bomb(99, 20),
    "recursive_alias": MINIMAL + "a: &x [*x]\n",
    "nested_30000_deep": MINIMAL + "x: " + "[" * 30_000 + "]" * 30_000 + "\n",
}


def validate_ms(path: Path, repeat: int) -> tuple[float, int]:
    """Median milliseconds of `trinity config validate -c path` in this process, and its exit code."""
    times, code = [], 0
    for _ in range(repeat):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            start = time.perf_counter()
            code = main(["config", "validate", "-c", str(path), "hardware=cpu"])
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, code


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        validate_ms(REPO / "examples" / "grpo_gsm8k" / "gsm8k.yaml", 3)  # warm-up: imports, caches
        baseline, _ = validate_ms(REPO / "examples" / "grpo_gsm8k" / "gsm8k.yaml", args.repeat)
        print(f"{'reference_validate_ms':32} {baseline:.1f}")
        for name, text in CASES.items():
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(text)
            ms, code = validate_ms(path, args.repeat)
            print(f"{name + '_ms':32} {ms:.1f}  (exit {code}, {ms / baseline:.2f}x the reference)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'peak_rss_mib':32} {peak:.0f}")


if __name__ == "__main__":
    main_()
