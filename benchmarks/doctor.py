"""Benchmark of `trinity doctor` (goal: under a second on a machine without vendor packages),
reported against the bare interpreter start measured in the same run.

    python benchmarks/doctor.py [--repeat N]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from config_render import fresh_process_median  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    args = parser.parse_args()
    floor = fresh_process_median([sys.executable, "-c", "pass"], args.repeat)
    doctor = fresh_process_median([sys.executable, "-m", "trinity", "doctor"], args.repeat)
    print(f"{'floor_python_start_ms':32} {floor * 1e3:.1f}")
    print(f"{'doctor_ms':32} {doctor * 1e3:.1f}")
    print(f"{'doctor_over_floor':32} {doctor / floor:.1f}")
    print(f"{'doctor_goal_ms':32} 1000")


if __name__ == "__main__":
    main()
