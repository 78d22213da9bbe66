"""`trinity doctor`: this machine's devices, drivers, packages and known conflicts."""

import argparse
import json

from .. import paths
from ._common import TEXT_OR_JSON, add_format_option, add_profile_dir_option


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `doctor`."""
    doctor = commands.add_parser(
        "doctor", parents=[parent], help="check this machine's devices, CANN/CUDA and packages"
    )
    add_profile_dir_option(doctor)
    add_format_option(doctor, TEXT_OR_JSON)
    doctor.set_defaults(run=doctor_cmd)


def doctor_cmd(args: argparse.Namespace) -> int:
    """Print the report; exit 1 when it found an error-level problem."""
    from .doctor import diagnose, render_text

    report = diagnose(dirs=paths.profile_dirs(tuple(args.profile_dir)))
    print(
        json.dumps(report, indent=2) if args.format == "json" else render_text(report),
        end="" if args.format == "text" else "\n",
    )
    return 1 if any(p["severity"] == "error" for p in report["problems"]) else 0
