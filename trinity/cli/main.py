"""Entry point of the `trinity` command: parse, dispatch, turn config errors into exit code 2."""

import argparse
import os
import sys
import traceback

# The CLI's models need no pydantic plugins, and looking for them scans every installed
# distribution's metadata: ~40 ms of a ~350 ms `trinity config render` (benchmarks/).
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from ..errors import ConfigError  # noqa: E402
from . import config_cmd, doctor_cmd, plan_cmd, profile_cmd, run_cmd  # noqa: E402

EXIT_CONFIG_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--debug", action="store_true", help="show Python tracebacks")
    parser = argparse.ArgumentParser(
        prog="trinity", description="Hardware-aware front end of the Trinity RL fine-tuning framework."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (run_cmd, config_cmd, plan_cmd, profile_cmd, doctor_cmd):
        module.register(commands, parent)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    # Overrides may stand before, between or after options; argparse's intermixed mode cannot do subcommands.
    args, extra = parser.parse_known_args(argv)
    flags = [a for a in extra if a.startswith("-")]
    if flags or (extra and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(flags or extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parse(build_parser(), argv)
    try:
        return args.run(args)
    except ConfigError as exc:
        if args.debug:
            traceback.print_exc()
        print(exc.report(), file=sys.stderr)
        return EXIT_CONFIG_ERROR
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (exit_code 143); teardown already ran
        return getattr(exc, "exit_code", 130)
    except BrokenPipeError:  # the reader stopped reading (`| head`): nothing more to say, as for SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python flushes stdout again at exit
        return 141
    except Exception as exc:  # a bug of ours: say so briefly, unless --debug asks for the trace
        if args.debug:
            raise
        print(
            f"trinity: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
