"""`trinity run`: resolve, check before Ray, plan, place every role, train stage by stage, summarise, tear down."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError, Issue, PlacementError

if TYPE_CHECKING:  # the CLI imports the config layer lazily: `trinity --help` stays fast
    from ..config.compose import Composed
    from ..config.resolve import ResolvedConfig
    from ..config.schema import RunConfig
    from ..runtime.driver.preflight import VerlCheck
from ._common import (
    TEXT_OR_JSON,
    add_config_options,
    add_format_option,
    fit_checked,
    print_issues,
    request_from,
)

PLACED_ONLY = (
    "trinity run --placement-only: every role actor started where the plan put it and reported its "
    "devices and environment; nothing was trained, and the actors and placement groups have been removed."
)


def register(commands: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add `run`."""
    run = commands.add_parser(
        "run",
        parents=[parent],
        help="train: plan the run, check it against the Ray cluster, launch every role, and run each stage",
    )
    add_config_options(run)
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="print the launch plan; with $RAY_ADDRESS or cluster.ray_address also check it fits; create nothing",
    )
    run.add_argument(
        "--placement-only",
        action="store_true",
        help="start every role where the plan puts it, check placement and environment, tear down; train nothing",
    )
    add_format_option(run, TEXT_OR_JSON)
    run.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds to wait for each placement group and for the actors to start (default: 60)",
    )
    run.add_argument(
        "--quiet", action="store_true", help="no progress bar or lines (the summary and errors are still printed)"
    )
    run.add_argument(
        "--force", action="store_true", help="resume even when the saved config differs in a key that changes the run"
    )
    run.add_argument(
        "--show-secrets", action="store_true", help="print credential-like env values (the actors get them either way)"
    )
    run.set_defaults(run=run_cmd)


def run_cmd(args: argparse.Namespace) -> int:
    """Dry run: print the plan. Placement only: launch, verify, tear down. Otherwise train every stage.

    The config is resolved once before Ray (what can be checked without the cluster ends the run in
    seconds, preflight included) and once against the cluster where the cluster may change it (a
    gpu_per_node nobody wrote); preflight checks again only a config the cluster changed."""
    import signal

    from ..config.compose import compose
    from ..config.run_target import run_target
    from ..launch.launcher import cpus_needed, join, start_local
    from ..launch.plan import build_plan
    from ..launch.reconcile import live_nodes, resolve_on_cluster

    request = request_from(args)
    composed = compose(request)
    target = run_target(composed)
    standalone, refusal = _standalone(composed, args.strict)
    if args.dry_run and not target.address:
        if refusal:
            raise refusal
        print_issues(fit_checked(standalone, args.strict)[1])
        return _show(args, [(n, build_plan(c), None) for n, c in standalone.runs])
    training = not (args.dry_run or args.placement_only)
    signal.signal(signal.SIGTERM, _terminate)  # a scheduler's kill tears down like Ctrl-C
    # verl's check imports verl from here on, beside the demo's build and the driver's checks (which end the run
    # here); it answers once Ray is up, before anything is created in it
    fetched: dict = {}  # hub name -> its local folder, fetched before Ray (training runs only)
    with _early_check(standalone if training else None) as verl:
        if args.config is None and not args.dry_run and _ensure_demo(args):
            standalone, refusal = _standalone(composed, args.strict)  # what derive rules read of the model is there now
        if standalone is not None:  # a role that cannot fit its devices, or a config that cannot run here, ends here
            fit_checked(standalone, args.strict)
            if training:  # every problem at once, the names of hub repos located; then they download
                fetched = _checked(standalone, args, verl)
        import ray

        try:
            if not join(target):  # no cluster named or running here (a dry run always names one by now)
                if refusal:  # no cluster to ask: the config must stand on its own
                    raise refusal
                start_local(target, max(cpus_needed(build_plan(c)) for _, c in standalone.runs))
            signal.signal(signal.SIGTERM, _terminate)  # again: Ray's core worker installs a SIGTERM handler that aborts
            verl.wait()
            resolved = resolve_on_cluster(request, live_nodes(), args.strict, target, standalone)
            changed = resolved is not standalone
            if training:  # a name only the cluster's config has is fetched now; the others keep their commit
                fetched = _fetch(resolved, args, fetched)
                resolved = _local(resolved, fetched)
            print_issues(fit_checked(resolved, args.strict)[1])
            if training and changed:  # the cluster changed what is launched: check it
                with _preflight(resolved) as again:
                    again.wait()
            if training and fetched:
                from ..launch.node_copies import spread

                spread(sorted({f.folder for f in fetched.values()}), args.quiet)
            if args.dry_run:
                from ..launch.launcher import check_live

                plans = ((n, build_plan(c)) for n, c in resolved.runs)
                return _show(args, [(n, plan, check_live(plan)) for n, plan in plans])
            if args.placement_only:
                return _placement_only(args, resolved.config)
            return _train(args, resolved)
        finally:
            ray.shutdown()


def _early_check(resolved: ResolvedConfig | None) -> VerlCheck:
    """verl's check of `resolved`, importing verl from now on; None: nothing to check."""
    from ..runtime.driver.preflight import VerlCheck, early

    return VerlCheck(None) if resolved is None else early(resolved)


def _checked(resolved: ResolvedConfig, args: argparse.Namespace, verl: VerlCheck) -> dict:
    """The driver's checks of `resolved` with the names of hub repos located (one report of every problem, exit 2),
    then those downloaded and what the run reads from their folders checked; returns the fetched names."""
    from ..launch.fetch import locate_inputs
    from ..runtime.driver.preflight import check_inputs, driver_checks, training_stages

    inputs = locate_inputs(resolved)
    driver_checks(resolved, inputs.problems)
    fetched = inputs.fetched(args.quiet)
    local = _local(resolved, fetched)
    if fetched:
        check_inputs(local)
    verl.ask(training_stages(local))  # verl's check reads the trainer sections as the trainer will: local folders
    return fetched


def _fetch(resolved: ResolvedConfig, args: argparse.Namespace, pinned: dict) -> dict:
    """Every model and data set `resolved` names by hub id, fetched into the hub cache (FetchError: exit 2); `pinned`,
    fetched earlier in this run, as they are."""
    from ..launch.fetch import fetch

    return fetch(resolved, args.quiet, pinned)


def _local(resolved: ResolvedConfig, fetched: dict) -> ResolvedConfig:
    """`resolved` naming each fetched hub name by its local folder: what the checks and the roles read."""
    from ..config.hub.local import localised

    return localised(resolved, fetched) if fetched else resolved


def _preflight(resolved: ResolvedConfig) -> VerlCheck:
    """The driver's checks of `resolved` (a ConfigError ends the run here), then verl's under way."""
    from ..runtime.driver.preflight import start

    return start(resolved)


def _standalone(composed: Composed, strict: bool) -> tuple[ResolvedConfig | None, ConfigError | None]:
    """(the config resolved without a cluster, None), or (None, its ConfigError) when only the cluster's device
    counts can make it valid.

    A live cluster changes only the device split (what its nodes offer, a gpu_per_node left unset, a
    gpu_per_node above what they offer lowered, and with them a mode nobody set on a single device), so
    an error about any other key stops the run here, before Ray. What does not fit a device here does not
    fit on the cluster either: against the config resolved here, the cluster can only lower gpu_per_node
    (this machine's devices count only where the run's Ray is this machine's), which leaves the trainer
    fewer devices.
    """
    from ..config.resolve import resolve

    try:
        return resolve(composed, strict=strict), None
    except ConfigError as exc:
        if any(i.severity == "error" and not i.key.startswith(DEVICE_SPLIT_KEYS) for i in exc.issues):
            raise
        return None, exc  # resolve_on_cluster reports it, with the cluster's numbers


# what the cluster's device count decides
DEVICE_SPLIT_KEYS = (
    "cluster.",
    "explorer.rollout_model.",
    "explorer.auxiliary_models",
)


def _ensure_demo(args: argparse.Namespace) -> bool:
    """Build the demo's assets unless they are there; returns whether it built them."""
    import subprocess

    from .. import demo
    from ..utils.child import module_command

    folder = demo.demo_dir()
    if demo.complete(folder):
        return False
    if not args.quiet:
        print(
            f"trinity run: building the demo's model, tokenizer and problems in {folder} (once, no download)",
            file=sys.stderr,
        )
    # in a process of its own: the build imports torch and transformers, which would stay in the driver all run long
    built = subprocess.run(
        module_command("trinity.demo", str(folder)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        if args.debug:
            sys.stderr.write(built.stderr)
        lines = [line for line in built.stderr.splitlines() if line.strip()]
        raise ConfigError(
            [
                Issue(
                    f"cannot build the demo's assets in {folder}: {lines[-1] if lines else f'exit {built.returncode}'}",
                    source=f"${demo.DIR_ENV}" if os.environ.get(demo.DIR_ENV) else f"the default ({demo.DEFAULT_DIR})",
                    hint=f"set {demo.DIR_ENV} to a folder you can write, or run your own config with --config",
                )
            ]
        )
    return True


def _show(args: argparse.Namespace, plans: list) -> int:
    """Print each stage's plan; a plan that does not fit is an error (exit 2) with the explanation."""
    from ..launch.show import plan_data, plan_text

    if args.format == "json":
        docs = [
            plan_data(plan, args.show_secrets) | ({"feasibility": {"ok": f.ok, "lines": list(f.lines)}} if f else {})
            for _, plan, f in plans
        ]
        print(
            json.dumps(
                docs[0] if len(docs) == 1 else {"stages": [{"stage": n} | d for (n, _, _), d in zip(plans, docs)]},
                indent=2,
            )
        )
    else:
        for name, plan, feasibility in plans:
            print(
                (f"stage {name}: " if name else "") + plan_text(plan, feasibility, args.show_secrets),
                end="" if len(plans) == 1 else "\n",
            )
    bad = [line for _, _, f in plans if f and not f.ok for line in f.lines]
    if bad:
        raise PlacementError(
            [
                Issue(
                    "the launch plan does not fit the Ray cluster; nothing was created",
                    key="placement",
                    source="Ray cluster",
                    hint="; ".join(bad),
                )
            ]
        )
    return 0


def _placement_only(args: argparse.Namespace, config: RunConfig) -> int:
    """Create the groups, start every role (constructed lightly), check where each landed, remove everything."""
    from ..launch.launcher import Launch, check_live
    from ..launch.plan import build_plan
    from ..launch.show import placements_text, plan_data, plan_text
    from ..runtime.roles.base import Role

    plan = build_plan(config)
    feasibility = check_live(plan)
    if not feasibility.ok:
        return _show(args, [(None, plan, feasibility)])
    if args.format == "text":
        print(plan_text(plan, feasibility, args.show_secrets))
    with Launch(plan, args.timeout) as launch:
        launch.create_groups()
        # every role's base process: it reports placement and environment only
        launch.start_actors(lambda spec: (Role, {}))
        placements = launch.placements()
    if args.format == "json":
        print(
            json.dumps(
                {
                    "plan": plan_data(plan, args.show_secrets),
                    "feasibility": list(feasibility.lines),
                    "placements": [asdict(p) for p in placements],
                },
                indent=2,
            )
        )
    else:
        print(placements_text(placements), end="")
    bad = [p for p in placements if p.problem]
    print(PLACED_ONLY if not bad else f"trinity run: {len(bad)} actor(s) did not land as planned", file=sys.stderr)
    return 1 if bad else 0


def _train(args: argparse.Namespace, resolved: ResolvedConfig) -> int:
    """Every stage in order; the summary table (or JSON) at the end; a failed role is exit 1 with its error."""
    from ..runtime.driver.run import RunOptions, run_dir_of, train
    from ..runtime.driver.watcher import RoleFailed
    from ..runtime.records.progress import summary_table

    show = _Shown(args.format, args.quiet, args.show_secrets)
    try:
        with _stdout_to_stderr(args.format == "json"):
            summaries = train(resolved, RunOptions(args.timeout, args.quiet, args.force), show)
    except RoleFailed as exc:
        print(f"trinity run: {exc}; every actor and placement group was removed", file=sys.stderr)
        if args.format == "json":  # the same failure as metrics.jsonl's line: the cause, then the rest
            print(json.dumps({"run_dir": str(run_dir_of(resolved.config).root), "failure": exc.record()}, indent=2))
        return 1
    run_dir = run_dir_of(resolved.config).root
    if args.format == "json":
        print(
            json.dumps(
                {"run_dir": str(run_dir), "stages": [asdict(s) for s in summaries], "launches": show.launches},
                indent=2,
                default=str,
            )
        )
    else:
        print(summary_table(summaries) + f"run directory: {run_dir}")
    return 0


@contextlib.contextmanager
def _stdout_to_stderr(json_out: bool):
    """With --format json, stdout is the one JSON document: while the run runs, what is printed there (Ray's
    "(raylet) A worker died ..." line, printed by a thread of its driver, a library's own print) goes to stderr, at
    the file descriptor, so a C library's writes too."""
    if not json_out:
        yield
        return
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(kept, 1)
        os.close(kept)


class _Shown:
    """What `trinity run` prints of each stage's launch: the plan and placements as text, or kept for JSON."""

    def __init__(self, fmt: str, quiet: bool, show_secrets: bool):
        self.fmt, self.quiet, self.show_secrets, self.launches = fmt, quiet, show_secrets, []

    def plan(self, stage: str, plan, feasibility) -> None:
        from ..launch.show import plan_data, plan_text

        self.launches.append(
            {"stage": stage, "plan": plan_data(plan, self.show_secrets), "feasibility": list(feasibility.lines)}
        )
        if self.fmt == "text" and not self.quiet:
            print(f"stage {stage}: " + plan_text(plan, feasibility, self.show_secrets), file=sys.stderr)

    def placements(self, placements, kept: tuple[str, ...]) -> None:
        """Where each actor landed, and which ones run on from the previous stage (kept and restaged)."""
        from ..launch.show import placements_text

        self.launches[-1] |= {"placements": [asdict(p) for p in placements], "kept": list(kept)}
        if self.fmt == "text" and not self.quiet:
            if kept:
                print(f"kept running from the previous stage: {', '.join(kept)}", file=sys.stderr)
            print(placements_text(placements), file=sys.stderr)

    def endpoints(self, urls: list[str], listed: Path, proxy: str | None = None) -> None:
        """The stage's OpenAI endpoints, one per engine (serve mode: the proxy in front of them), and the file that
        lists them."""
        self.launches[-1] |= {"openai_endpoints": urls} | ({"openai_proxy": proxy} if proxy else {})
        if self.fmt == "text" and not self.quiet:
            lines = "".join(f"\n  engine {i}: {url}" for i, url in enumerate(urls))
            if proxy:
                lines += f"\n  proxy (every engine, /feedback, calls recorded): {proxy}"
            print(f"OpenAI endpoints (listed in {listed}):{lines}", file=sys.stderr)


class Terminated(KeyboardInterrupt):
    """SIGTERM: stop like Ctrl-C, exit 143."""

    exit_code = 143


def _terminate(*_) -> None:
    raise Terminated
