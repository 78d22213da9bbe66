"""Entry point of the `trinity` command: parse, dispatch, turn config errors into exit code 2."""

import argparse
import os
import sys
import traceback

# The CLI's models need no pydantic plugins, and looking for them scans every installed
# distribution's metadata: ~40 ms of a ~350 ms `trinity config render` (benchmarks/).
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from importlib import import_module  # noqa: E402

from ..errors import ConfigError  # noqa: E402

EXIT_CONFIG_ERROR = 2


# Each command and the module that registers it, in the order `trinity --help` lists them
COMMANDS = {
    "run": "run_cmd",
    "config": "config_cmd",
    "plan": "plan_cmd",
    "profile": "profile_cmd",
    "doctor": "doctor_cmd",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command tree; or, for a known `command`, the tree of that command alone (what parsing its
    arguments reads: the other commands' modules need not be imported)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--debug", action="store_true", help="show Python tracebacks")
    parser = argparse.ArgumentParser(
        prog="trinity", description="Hardware-aware front end of the Trinity RL fine-tuning framework."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        if command not in COMMANDS or command == name:
            import_module(f"{__package__}.{module}").register(commands, parent)
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
    argv = sys.argv[1:] if argv is None else argv
    args = _parse(build_parser(argv[0] if argv else None), argv)
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
