"""`trinity config render|validate`: show or check the resolved run config."""

import argparse
import json
from dataclasses import replace
from pathlib import Path

from ..config.redact import mask_override, redact
from ._common import (
    TEXT_OR_JSON,
    add_config_options,
    add_format_option,
    add_output_option,
    dump,
    emit,
    print_issues,
    raise_errors,
    request_from,
    with_memory_fit,
)


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `config render`, `validate`, `diff` and `schema`."""
    group = commands.add_parser("config", help="inspect and check run configs").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    render = group.add_parser("render", parents=[parent], help="print the resolved run config for a hardware profile")
    add_config_options(render)
    add_format_option(render)
    render.add_argument("--stage", metavar="NAME", help="render one stage merged into the root config")
    render.add_argument(
        "--show-secrets", action="store_true", help="do not mask values of keys named like TOKEN, KEY, SECRET, PASSWORD"
    )
    add_output_option(render)
    render.add_argument(
        "--explain",
        nargs="*",
        metavar="KEY",
        help="show where each value (or each KEY, or each key under a section) came from",
    )
    render.set_defaults(run=render_cmd)
    check = group.add_parser("validate", parents=[parent], help="check a run config against a hardware profile")
    add_config_options(check)
    add_format_option(check, TEXT_OR_JSON)
    check.set_defaults(run=validate_cmd)
    compare = group.add_parser(
        "diff", parents=[parent], help="compare two resolved configs key by key (exit 1 when they differ)"
    )
    add_config_options(compare)
    compare.add_argument(
        "--vs",
        nargs="+",
        default=[],
        metavar="OVERRIDE",
        help="overrides of the right-hand side, on top of the left's (e.g. --vs hardware=ascend910b)",
    )
    compare.add_argument(
        "--vs-config", type=Path, metavar="FILE", help="run config of the right-hand side (default: the left's)"
    )
    compare.add_argument(
        "--saved", type=Path, metavar="FILE", help="a saved render (YAML or JSON) to compare with this resolution"
    )
    compare.add_argument("--show-secrets", action="store_true", help="compare and show credential-like values")
    add_format_option(compare, TEXT_OR_JSON)
    compare.set_defaults(run=diff_cmd)
    schema = group.add_parser(
        "schema", parents=[parent], help="print the JSON Schema of run-config files (for editors)"
    )
    add_output_option(schema)
    schema.set_defaults(run=schema_cmd, schema="run-config")


def render_cmd(args: argparse.Namespace) -> int:
    """Print the resolved config, or where its values came from."""
    from ..config.resolve import resolve

    keys = _split_explain(args)
    resolved = resolve(request_from(args), strict=args.strict)
    print_issues(resolved.issues)
    if args.explain is not None:
        from ..config.explain import explain
        from ..config.explain import render_text as explain_text

        found = explain(resolved, keys, args.show_secrets, args.stage)
        text = dump({"explain": [e.as_dict() for e in found]}, "json") if args.format == "json" else explain_text(found)
        emit(text, args.output)
        return 0
    config, _ = resolved.of(args.stage)
    data = config.model_dump(mode="json")
    emit(dump(data if args.show_secrets else redact(data), args.format), args.output)
    return 0


def _split_explain(args: argparse.Namespace) -> list[str]:
    # `--explain KEY...` also swallows overrides written after it; they are the ones with = or ~.
    keys = [a for a in args.explain or [] if "=" not in a and not a.startswith("~")]
    args.overrides = [*args.overrides, *[a for a in args.explain or [] if a not in keys]]
    return keys


def diff_cmd(args: argparse.Namespace) -> int:
    """Print the differences; exit 0 when there are none, 1 when there are."""
    from ..config.diff import diff
    from ..config.diff import render_text as diff_text
    from ..config.resolve import resolve
    from ..config.sources.yaml_file import load_yaml

    left_request = request_from(args)
    right = resolve(
        replace(left_request, config=args.vs_config or args.config, overrides=(*args.overrides, *args.vs)),
        strict=args.strict,
    )
    if args.saved:
        left_data, left_label = load_yaml(args.saved, what="saved config").data, str(args.saved)
    else:
        left_data, left_label = (
            resolve(left_request, strict=args.strict).config.model_dump(mode="json"),
            _label(args.config, args.overrides),
        )
    right_data, right_label = (
        right.config.model_dump(mode="json"),
        _label(args.vs_config or args.config, (*args.overrides, *args.vs)),
    )
    if not args.show_secrets:
        left_data, right_data = redact(left_data), redact(right_data)
    changes = diff(left_data, right_data)
    if args.format == "json":
        print(
            json.dumps(
                {
                    "left": left_label,
                    "right": right_label,
                    "same": not changes,
                    "changes": [c.as_dict() for c in changes],
                },
                indent=2,
            )
        )
    else:
        print(diff_text(changes, left_label, right_label), end="")
    return 1 if changes else 0


def _label(config: Path | None, overrides: tuple | list) -> str:
    return " ".join([str(config or "(default config)"), *map(mask_override, overrides)])


def validate_cmd(args: argparse.Namespace) -> int:
    """Resolve, check the memory fit, that the data sets are on disk and the hub names in the cache or on the hub,
    and report; exit 0 when valid."""
    from ..config.hub.issues import hub_issues
    from ..config.local_inputs import data_issues
    from ..config.resolve import as_strict, resolve
    from ..config.workflow_checks import workflow_issues

    resolved = resolve(request_from(args), strict=args.strict)
    plans, issues = with_memory_fit(resolved, args.strict)
    hub = hub_issues(resolved)
    # a workflow's missing package is a warning here: the explorer may run on another machine
    flows = workflow_issues(resolved, missing="warning")
    issues = [*data_issues(resolved), *(map(as_strict, hub + flows) if args.strict else hub + flows), *issues]
    raise_errors(issues)
    hardware = resolved.config.hardware
    warnings = sum(i.severity == "warning" for i in issues)
    if args.format == "json":
        from ..config.memory.report import plans_dict

        report = {
            "valid": True,
            "hardware": hardware.name,
            "issues": [i.as_dict() for i in issues],
            "memory": plans_dict(plans),
        }
        print(json.dumps(report, indent=2))
    else:
        print_issues(issues)
        stages = f", {len(resolved.stages)} stage(s)" if resolved.stages else ""
        print(f"valid for {hardware.name} ({hardware.device_type}){stages}: {warnings} warning(s)")
    return 0


def schema_cmd(args: argparse.Namespace) -> int:
    """Print a JSON Schema generated from the pydantic models."""
    from ..config.json_schema import SCHEMAS, dumps

    emit(dumps(SCHEMAS[args.schema]()), args.output)
    return 0
