"""`trinity config render|validate`: show or check the resolved run config."""

import argparse
import json
from pathlib import Path

from ..config.json_schema import SCHEMAS, dumps
from ..config.redact import redact
from ..config.resolve import resolve
from ._common import add_config_options, add_format_option, dump, emit, print_issues, request_from


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `config render` and `config validate`."""
    group = commands.add_parser("config", help="inspect and check run configs").add_subparsers(dest="action", required=True, metavar="ACTION")
    render = group.add_parser("render", parents=[parent], help="print the resolved run config for a hardware profile")
    add_config_options(render)
    add_format_option(render)
    render.add_argument("--stage", metavar="NAME", help="render one stage merged into the root config")
    render.add_argument("--show-secrets", action="store_true", help="do not mask values of keys named like TOKEN, KEY, SECRET, PASSWORD")
    render.add_argument("-o", "--output", type=Path, help="write to this file (atomically) instead of stdout")
    render.set_defaults(run=render_cmd)
    check = group.add_parser("validate", parents=[parent], help="check a run config against a hardware profile")
    add_config_options(check)
    add_format_option(check, ("text", "json"))
    check.set_defaults(run=validate_cmd)
    schema = group.add_parser("schema", parents=[parent], help="print the JSON Schema of run-config files (for editors)")
    schema.add_argument("-o", "--output", type=Path, help="write to this file (atomically) instead of stdout")
    schema.set_defaults(run=schema_cmd, schema="run-config")


def render_cmd(args: argparse.Namespace) -> int:
    """Print the resolved config."""
    resolved = resolve(request_from(args), strict=args.strict)
    print_issues(resolved.issues)
    config = resolved.stage(args.stage) if args.stage else resolved.config
    data = config.model_dump(mode="json")
    emit(dump(data if args.show_secrets else redact(data), args.format), args.output)
    return 0


def validate_cmd(args: argparse.Namespace) -> int:
    """Resolve and report; exit 0 when valid."""
    resolved = resolve(request_from(args), strict=args.strict)
    hardware = resolved.config.hardware
    warnings = sum(i.severity == "warning" for i in resolved.issues)
    if args.format == "json":
        report = {"valid": True, "hardware": hardware.name, "issues": [i.as_dict() for i in resolved.issues]}
        print(json.dumps(report, indent=2))
    else:
        print_issues(resolved.issues)
        stages = f", {len(resolved.stages)} stage(s)" if resolved.stages else ""
        print(f"valid for {hardware.name} ({hardware.device_type}){stages}: {warnings} warning(s)")
    return 0


def schema_cmd(args: argparse.Namespace) -> int:
    """Print a JSON Schema generated from the pydantic models."""
    emit(dumps(SCHEMAS[args.schema]()), args.output)
    return 0
