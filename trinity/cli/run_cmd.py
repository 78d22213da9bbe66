"""`trinity run`: resolve, plan, check against the cluster, launch the role actors, verify, tear down."""

import argparse
import json
import signal
import sys
from dataclasses import asdict

from ..errors import ConfigError, Issue
from ._common import (
    TEXT_OR_JSON,
    add_config_options,
    add_format_option,
    print_issues,
    request_from,
)

NO_RUNTIME = (
    "trinity run: every role actor started where the plan put it and reported its devices and environment. "
    "The training runtime (vLLM rollout, verl trainer) is not part of this version, so nothing was trained; "
    "the actors and placement groups have been removed."
)


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `run`."""
    run = commands.add_parser("run", parents=[parent], help="plan the run, check it against the Ray cluster, and launch it")
    add_config_options(run)
    run.add_argument("--dry-run", action="store_true", help="print the launch plan; with $RAY_ADDRESS or cluster.ray_address also check it fits; create nothing")
    add_format_option(run, TEXT_OR_JSON)
    run.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds to wait for each placement group and for the actors (default: 60)")
    run.add_argument("--show-secrets", action="store_true", help="print credential-like env values (the actors get them either way)")
    run.set_defaults(run=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Dry run: print the plan (checked against the cluster when one is named). Run: launch, verify, tear down."""
    from ..config.resolve import resolve
    from ..launch.launcher import (
        check_live,
        cpus_needed,
        join,
        run_identity,
        start_local,
    )
    from ..launch.plan import build_plan
    from ..launch.reconcile import live_nodes, resolve_on_cluster

    request = request_from(args)
    identity = run_identity(request)
    if args.dry_run and not identity.address:
        resolved = resolve(request, strict=args.strict)
        print_issues(resolved.issues)
        return _show(args, build_plan(resolved.config), None)
    import ray

    signal.signal(signal.SIGTERM, _interrupt)  # a scheduler's kill tears down like Ctrl-C
    try:
        if not join(identity):  # no cluster named or running here (a dry run always names one by now)
            standalone = resolve(request, strict=args.strict)  # no cluster to ask: the config must stand on its own
            start_local(identity, cpus_needed(build_plan(standalone.config)))
        nodes = live_nodes()
        resolved = resolve_on_cluster(request, nodes, strict=args.strict)
        print_issues(resolved.issues)
        plan = build_plan(resolved.config)
        feasibility = check_live(plan)
        if args.dry_run or not feasibility.ok:
            return _show(args, plan, feasibility)
        return _launch(args, plan, feasibility)
    finally:
        ray.shutdown()


def _show(args: argparse.Namespace, plan, feasibility) -> int:
    """Print the plan; a plan that does not fit is an error (exit 2) with the explanation."""
    from ..launch.show import plan_data, plan_text

    if args.format == "json":
        extra = {"feasibility": {"ok": feasibility.ok, "lines": list(feasibility.lines)}} if feasibility else {}
        print(json.dumps(plan_data(plan, args.show_secrets) | extra, indent=2))
    else:
        print(plan_text(plan, feasibility, args.show_secrets), end="")
    if feasibility and not feasibility.ok:
        raise ConfigError([Issue("the launch plan does not fit the Ray cluster; nothing was created", key="placement", source="Ray cluster", hint="; ".join(feasibility.lines))])
    return 0


def _launch(args: argparse.Namespace, plan, feasibility) -> int:
    """Create the groups, start the actors, check where they landed, remove everything."""
    from ..launch.launcher import Launch
    from ..launch.show import placements_text, plan_data, plan_text

    if args.format == "text":
        print(plan_text(plan, feasibility, args.show_secrets))
    with Launch(plan, args.timeout) as launch:
        launch.create_groups()
        launch.start_actors()
        placements = launch.placements()
    if args.format == "json":
        print(json.dumps({"plan": plan_data(plan, args.show_secrets), "feasibility": list(feasibility.lines), "placements": [asdict(p) for p in placements]}, indent=2))
    else:
        print(placements_text(placements), end="")
    bad = [p for p in placements if p.problem]
    print(NO_RUNTIME if not bad else f"trinity run: {len(bad)} actor(s) did not land as planned", file=sys.stderr)
    return 1 if bad else 0


def _interrupt(*_) -> None:
    raise KeyboardInterrupt
