"""`trinity profile list`: the hardware profiles this installation can use."""

import argparse
import json
from pathlib import Path

from .. import paths
from ..config.profiles import available, load_profile
from ..config.sources.yaml_file import display_path
from .config_cmd import schema_cmd


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `profile list`."""
    group = commands.add_parser("profile", help="hardware profiles").add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = group.add_parser("list", parents=[parent], help="list the available hardware profiles")
    listing.add_argument("--profile-dir", action="append", default=[], metavar="DIR", help="extra folder of hardware profiles")
    listing.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    listing.set_defaults(run=list_cmd)
    schema = group.add_parser("schema", parents=[parent], help="print the JSON Schema of hardware-profile files (for editors)")
    schema.add_argument("-o", "--output", type=Path, help="write to this file (atomically) instead of stdout")
    schema.set_defaults(run=schema_cmd, schema="hardware-profile")


def list_cmd(args: argparse.Namespace) -> int:
    """Print one row per profile."""
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
        print(f"{r['name']:<{width}}  {r['device_type']:<6}  {r['devices_per_node']:>8}  {r['description']}  [{r['source']}]")
    return 0
