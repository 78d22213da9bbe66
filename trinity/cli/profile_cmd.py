"""`trinity profile list|show|lint|schema`: the hardware profiles this installation can use, and their checks."""

import argparse
import json
from pathlib import Path

from .. import paths
from ..config.merge import leaves
from ..config.redact import redact
from ..config.sources.yaml_file import display_path
from ..errors import dotted
from ._common import (
    TEXT_OR_JSON,
    add_format_option,
    add_output_option,
    add_profile_dir_option,
)
from .config_cmd import schema_cmd


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `profile list`, `show`, `lint` and `schema`."""
    group = commands.add_parser("profile", help="hardware profiles").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    listing = group.add_parser("list", parents=[parent], help="list the available hardware profiles")
    add_profile_dir_option(listing)
    add_format_option(listing, TEXT_OR_JSON)
    listing.set_defaults(run=list_cmd)
    show = group.add_parser(
        "show", parents=[parent], help="a profile after `extends`, with the file and line of every value"
    )
    show.add_argument("name", metavar="NAME")
    add_profile_dir_option(show)
    add_format_option(show, TEXT_OR_JSON)
    show.add_argument(
        "--show-secrets",
        action="store_true",
        help="do not mask values of env vars named like TOKEN, KEY, SECRET, PASSWORD",
    )
    show.set_defaults(run=show_cmd)
    check = group.add_parser(
        "lint", parents=[parent], help="check profiles: schema, extends, env names, facts, Ray's names"
    )
    check.add_argument(
        "targets", nargs="*", type=Path, metavar="PATH", help="profile files or folders (default: every profile in use)"
    )
    add_profile_dir_option(check)
    add_format_option(check, TEXT_OR_JSON)
    check.set_defaults(run=lint_cmd)
    schema = group.add_parser(
        "schema", parents=[parent], help="print the JSON Schema of hardware-profile files (for editors)"
    )
    add_output_option(schema)
    schema.set_defaults(run=schema_cmd, schema="hardware-profile")


def list_cmd(args: argparse.Namespace) -> int:
    """Print one row per profile."""
    from ..config.profiles import available, load_profile

    dirs = paths.profile_dirs(tuple(args.profile_dir))
    rows = []
    for name, path in available(dirs).items():
        facts = load_profile(name, dirs).profile
        rows.append(
            {
                "name": name,
                "device_type": facts.facts.device_type,
                "devices_per_node": facts.facts.devices_per_node,
                "extends": facts.extends,
                "description": facts.description,
                "source": display_path(path),
            }
        )
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    width = max((len(r["name"]) for r in rows), default=4)
    print(f"{'NAME':<{width}}  DEVICE  PER NODE  DESCRIPTION")
    for r in rows:
        print(
            f"{r['name']:<{width}}  {r['device_type']:<6}  {r['devices_per_node']:>8}  {r['description']}  "
            f"[{r['source']}]"
        )
    return 0


def show_cmd(args: argparse.Namespace) -> int:
    """Print one profile, every value with the file and line it came from."""
    from ..config.profiles import load_profile

    loaded = load_profile(args.name, paths.profile_dirs(tuple(args.profile_dir)))
    data = loaded.profile.model_dump(mode="json")
    data = data if args.show_secrets else redact(data)
    rows = [
        (dotted(p), json.dumps(v), loaded.where(p)) for p, v in leaves(data) if p and not isinstance(v, (list, dict))
    ]
    if args.format == "json":
        sources = {key: where for key, _, where in rows}
        print(
            json.dumps(
                {
                    "name": loaded.name,
                    "chain": [display_path(p) for p in loaded.chain],
                    "profile": data,
                    "sources": sources,
                },
                indent=2,
            )
        )
        return 0
    print(f"{loaded.name}: {' -> '.join(display_path(p) for p in loaded.chain)}")
    width = min(72, max(len(key) + len(value) for key, value, _ in rows) + 2)
    for key, value, where in rows:
        print(f"{key}: {value}{' ' * max(2, width - len(key) - len(value))}# {where}")
    return 0


def lint_cmd(args: argparse.Namespace) -> int:
    """Report every problem; exit 2 when there is an error."""
    from ..config.lint import as_dict as lint_dict
    from ..config.lint import lint

    report = lint(tuple(args.targets), tuple(args.profile_dir))
    if args.format == "json":
        print(
            json.dumps(
                {"checked": list(report.checked), "ok": report.ok, "problems": [lint_dict(i) for i in report.issues]},
                indent=2,
            )
        )
    else:
        for issue in report.issues:
            print(issue.render())
        errors = sum(i.severity == "error" for i in report.issues)
        print(
            f"checked {len(report.checked)} profile(s) ({', '.join(report.checked)}): {errors} error(s), "
            f"{len(report.issues) - errors} warning(s)"
        )
    return 0 if report.ok else 2
