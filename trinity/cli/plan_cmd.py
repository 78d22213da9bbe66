"""`trinity plan memory`: what each role will need of its devices' memory, before anything starts."""

import argparse
import json

from ._common import (
    TEXT_OR_JSON,
    add_config_options,
    add_format_option,
    print_issues,
    raise_errors,
    request_from,
    with_memory_fit,
)


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `plan memory`."""
    group = commands.add_parser("plan", help="what a run will need, worked out before it starts").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    memory = group.add_parser(
        "memory",
        parents=[parent],
        help="device memory per role and device: the estimate, its breakdown, what would make it fit",
    )
    add_config_options(memory)
    add_format_option(memory, TEXT_OR_JSON)
    memory.set_defaults(run=memory_cmd)


def memory_cmd(args: argparse.Namespace) -> int:
    """Print the breakdown (also when it does not fit); exit 2 when a role does not fit."""
    from ..config.memory.report import plans_dict, plans_text
    from ..config.resolve import resolve

    resolved = resolve(request_from(args), strict=args.strict)
    plans, issues = with_memory_fit(resolved, args.strict)
    if args.format == "json":
        # a role over its memory is no fit, also where ignore_validator_suggestions makes that a warning
        fits = all(plan.fits for _, plan in plans) and not any(i.severity == "error" for i in issues)
        print(
            json.dumps(
                {
                    "hardware": resolved.config.hardware.name,
                    "fits": fits,
                    "plans": plans_dict(plans),
                    "issues": [i.as_dict() for i in issues],
                },
                indent=2,
            )
        )
    else:
        print(plans_text(plans), end="")
    raise_errors(issues)
    print_issues(issues)
    return 0
