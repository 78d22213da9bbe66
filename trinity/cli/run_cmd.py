"""`trinity run`: resolve the run config; launching arrives with the launcher."""

import argparse
import sys

from ..config.resolve import resolve
from ._common import add_config_options, print_issues, request_from

NOT_YET = (
    "trinity run: the config is valid for {hardware}, but launching is not available in this version: "
    "the Ray launcher (placement groups, role actors) is not built yet, so nothing was started. "
    "`trinity config render` shows exactly what a run would use."
)


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `run`."""
    run = commands.add_parser("run", parents=[parent], help="resolve the run config and launch it")
    add_config_options(run)
    run.set_defaults(run=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Validate, then say plainly that launching is not available."""
    resolved = resolve(request_from(args), strict=args.strict)
    print_issues(resolved.issues)
    print(NOT_YET.format(hardware=resolved.config.hardware.name), file=sys.stderr)
    return 1
