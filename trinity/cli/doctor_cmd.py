"""`trinity doctor`: this machine's devices, drivers, packages and known conflicts."""

import argparse
import json

from .. import paths


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `doctor`."""
    doctor = commands.add_parser("doctor", parents=[parent], help="check this machine's devices, CANN/CUDA and packages")
    doctor.add_argument("--profile-dir", action="append", default=[], metavar="DIR", help="extra folder of hardware profiles")
    doctor.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    doctor.set_defaults(run=doctor_cmd)


def doctor_cmd(args: argparse.Namespace) -> int:
    """Print the report; exit 1 when it found an error-level problem."""
    from ..platforms.doctor import diagnose, render_text

    report = diagnose(dirs=paths.profile_dirs(tuple(args.profile_dir)))
    print(json.dumps(report, indent=2) if args.format == "json" else render_text(report), end="" if args.format == "text" else "\n")
    return 1 if any(p["severity"] == "error" for p in report["problems"]) else 0
