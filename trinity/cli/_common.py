"""Options and output shared by the commands that read a run config."""

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..errors import ConfigError, Issue

if TYPE_CHECKING:
    from ..config.compose import Request
    from ..config.memory import MemoryPlan
    from ..config.resolve import ResolvedConfig

Plans = list[tuple[str, "MemoryPlan"]]


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """--config, overrides, --profile-dir, --strict."""
    parser.add_argument(
        "-c", "--config", type=Path, help="run config YAML (default: the embedded demo, examples/arith/arith.yaml)"
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="OVERRIDE",
        help="hardware=NAME and Hydra overrides such as trainer.save_interval=50",
    )
    add_profile_dir_option(parser)
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")


def add_profile_dir_option(parser: argparse.ArgumentParser) -> None:
    """--profile-dir (repeatable)."""
    parser.add_argument(
        "--profile-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="extra folder of hardware profiles (repeatable; also $TRINITY_PROFILE_PATH)",
    )


TEXT_OR_JSON = ("text", "json")


def add_output_option(parser: argparse.ArgumentParser) -> None:
    """-o/--output."""
    parser.add_argument("-o", "--output", type=Path, help="write to this file (atomically) instead of stdout")


def add_format_option(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("yaml", "json")) -> None:
    """--format."""
    parser.add_argument("--format", choices=choices, default=choices[0], help=f"output format (default: {choices[0]})")


def request_from(args: argparse.Namespace) -> "Request":
    """The config request the options describe."""
    from ..config.compose import Request

    return Request(args.config, tuple(args.overrides), tuple(args.profile_dir))


def print_issues(issues: Iterable[Issue]) -> None:
    """Warnings and notes go to stderr so stdout stays machine-readable."""
    for issue in issues:
        print(issue.render(), file=sys.stderr)


def dump(data: Any, fmt: str) -> str:
    """`data` as YAML or JSON text."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    dumper = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=120)


def emit(text: str, output: Path | None) -> None:
    """Print `text`, or write it atomically to `output`."""
    if output is None:
        sys.stdout.write(text)
    else:
        from ..utils.atomic import write_text_atomic

        write_text_atomic(output, text)


def with_memory_fit(resolved: "ResolvedConfig", strict: bool) -> tuple[Plans, list[Issue]]:
    """The memory plans of a resolved config, and its issues with the memory fit's added."""
    from ..config.memory import memory_check

    plans, found = memory_check(resolved, strict)
    return plans, [*resolved.issues, *found]


def raise_errors(issues: list[Issue]) -> None:
    """Raise every issue when one of them is an error."""
    if any(i.severity == "error" for i in issues):
        raise ConfigError(issues)


def fit_checked(resolved: "ResolvedConfig", strict: bool) -> tuple[Plans, list[Issue]]:
    """with_memory_fit, raising every issue when a role does not fit: nothing starts after this."""
    plans, issues = with_memory_fit(resolved, strict)
    raise_errors(issues)
    return plans, issues
