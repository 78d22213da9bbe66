"""A whole run: the run directory and its lock, resume, then each stage in order on Ray.

Each stage starts from the previous stage's last checkpoint; a resumed run skips the stages its
checkpoints say are done and continues the one that is not from its last complete checkpoint.
"""

import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...config.diff import ABSENT, diff
from ...config.provenance import WRITTEN, Provenance
from ...config.redact import redact
from ...config.resolve import ResolvedConfig
from ...config.schema import RunConfig
from ...errors import ConfigError, Issue, PlacementError, undotted
from ...launch.roles import ROLLOUT
from ...utils.atomic import write_text_atomic
from ..records.metrics import MetricsLog
from ..records.progress import StageSummary
from ..records.run_dir import Checkpoint, RunDir
from . import loops
from .restarts import RestartBudget, restart_budget
from .stage import RoleHandles, Stage, StageStart
from .stage_restart import StageRestarts
from .watcher import RoleFailed

if TYPE_CHECKING:
    from ...launch.feasibility import Feasibility
    from ...launch.launcher import Launch, Placement
    from ...launch.plan import LaunchPlan
    from .factory import Make

# A resumed run must be the same run: these keys change what it trains (the rest, e.g. intervals, may change).
RUN_CHANGING = (
    "model.",
    "algorithm.",
    "buffer.batch_size",
    "buffer.train_batch_size",
    "buffer.explorer_input.",
    "buffer.trainer_input.",
    "hardware.name",
    "stages",
    "trainer.trainer_strategy",
    "trainer.fused_optimizer",  # torch takes `fused` back from the saved optimizer state: a change would be ignored
)


FAILURE = "failure"  # the metrics line of a run that a role's failure ended (RoleFailed.record)
EarlyLoads = dict[str, Any]  # engine name -> its early load (a Ray object ref), started by _prestart


class Show(Protocol):
    """What the run shows the user as it launches each stage (the CLI prints it as text or JSON)."""

    def plan(self, stage: str, plan: "LaunchPlan", feasibility: "Feasibility") -> None: ...
    def placements(self, placements: "list[Placement]", kept: tuple[str, ...]) -> None: ...
    def endpoints(self, urls: list[str], listed: Path, proxy: str | None = None) -> None: ...


@dataclass(frozen=True)
class RunOptions:
    timeout_s: float
    quiet: bool = False
    force: bool = False


def run_dir_of(config: RunConfig) -> RunDir:
    """`checkpoint_root_dir/project/name`, its roles logging to log.save_dir (else its logs/)."""
    return RunDir(Path(config.checkpoint_root_dir) / config.project / config.name, config.log.save_dir)


def train(resolved: ResolvedConfig, options: RunOptions, show: Show) -> list[StageSummary]:
    """Run every stage in order; `show` prints each stage's plan and placements."""
    config = resolved.config
    stages = list(resolved.runs)
    run_dir = run_dir_of(config)
    with run_dir.lock(_lock_mode({c.mode for _, c in stages})):
        _resume_point(run_dir, config, resolved.provenance, options.force)  # each stage finds its own checkpoint
        # credentials never reach the disk; `fetched`: the hub names the run read, and the commit of each
        run_dir.write_config(redact(config.model_dump(mode="json")) | _fetched(resolved))
        metrics = MetricsLog(
            run_dir.metrics, config.monitor, f"{config.project}/{config.name}", run_dir.root / "tensorboard"
        )
        budget = restart_budget(config)  # the run's one budget: every restart of any role counts against it
        try:
            return _stages(stages, _Run(run_dir, metrics, budget, options, show))
        finally:
            metrics.close()
            if config.monitor.enable_ray_timeline:
                _write_timeline(run_dir.timeline)


def _fetched(resolved: ResolvedConfig) -> dict[str, list]:
    return {"fetched": list(resolved.fetched)} if resolved.fetched else {}


def _write_timeline(path: Path) -> None:
    """Ray's timeline of the run's tasks and actor calls (chrome://tracing, Perfetto), written atomically; a run that
    failed still writes what Ray kept, and a timeline Ray cannot give is a note, not the run's error."""
    import ray

    try:
        events = ray.timeline()
    except Exception as exc:  # noqa: BLE001 (Ray gone with the failure being reported: that error is the run's)
        print(f"note: no Ray timeline written: {_last_line(exc)}", file=sys.stderr)
        return
    write_text_atomic(path, json.dumps(events))


def _lock_mode(modes: set) -> tuple[str, ...]:
    """Every mode the run's stages run: the run holds all their locks (Mode.locks) for its whole length."""
    return tuple(sorted(modes))


@dataclass(frozen=True)
class _Run:
    """What every stage of a run shares: its directory and records, its restart budget, how it was asked to run."""

    run_dir: RunDir
    metrics: MetricsLog
    budget: RestartBudget
    options: RunOptions
    show: Show


def _stages(stages: list, run: _Run) -> list[StageSummary]:
    from ...launch.launcher import Launch

    summaries, model_path, offset, early = [], stages[0][1].model.model_path, 0, {}
    with Launch(None, run.options.timeout_s) as launch:  # the run's actors: a stage keeps those its plan names alike
        for index, (name, config) in enumerate(stages):
            following = stages[index + 1][1] if index + 1 < len(stages) else None
            summary, last, early = _stage(
                index, name, config, StageStart(model_path, offset), run, launch, following, early
            )
            summaries.append(summary)
            if last:
                model_path, offset = str(last.path), last.global_step
    return summaries


def _own_checkpoint(run_dir: RunDir, index: int, config: RunConfig) -> Checkpoint | None:
    """The last complete checkpoint of stage `index` (run in `config`'s mode), if it saved one."""
    own = [c for c in run_dir.complete_checkpoints() if c.stage_index == index and c.mode == config.mode]
    return own[-1] if own else None


def _stage(
    index: int,
    name: str | None,
    config: RunConfig,
    first: StageStart,
    run: _Run,
    launch: "Launch",
    following: RunConfig | None,
    early: EarlyLoads,
) -> tuple[StageSummary, Checkpoint | None, EarlyLoads]:
    """Run stage `index` from where it stands (done earlier: skipped; begun: from its last complete checkpoint; else
    from `first`), again from its last checkpoint after each failure that restarts it (stage_restart.py). Returns its
    summary, its last checkpoint (the next stage's start) and the next stage's early loads."""
    restarts, before = StageRestarts.of(run.budget, run.metrics, name, config), len(run.budget.restarts)
    while True:
        latest = _own_checkpoint(run.run_dir, index, config)
        if latest and latest.stage_done:
            note = f"done {'before its restart' if restarts.count else 'earlier'} ({latest.path.name})"
            summary = StageSummary(name or "run", config.mode, note=note, restarts=_since(run.budget, before))
            return summary, latest, early
        start = replace(first, resume=latest, restarted=restarts.count > 0)
        stage = Stage(config, name, index, run.run_dir, run.metrics, start, run.options.quiet)
        stage.budget = run.budget  # the run's one budget: an engine or explorer replaced in the stage asks it too
        try:
            summary, early = _launch(stage, launch, run.show, following, early)
            summary.restarts = _since(run.budget, before)  # every role brought back while it ran
            return summary, stage.last_checkpoint, early
        except RoleFailed as failed:  # the run's records say what the user reads: the cause, then the rest
            resume = _own_checkpoint(run.run_dir, index, config)
            ended = restarts.after(failed, _roles(config), stage.reached(), resume.path.name if resume else None)
            if ended is not None:
                run.metrics.write(FAILURE, stage.reached(), stage.name, **ended.record())
                raise ended from None
        launch.teardown()  # the stage's actors (and the next stage's started early) end; the restart starts anew
        early = {}


def _since(budget: RestartBudget, before: int) -> list[dict]:
    """The restarts granted since the budget held `before` of them, as the summary lists them."""
    return [{"role": r.role, "cause": r.cause, "step": r.step} for r in budget.restarts[before:]]


def _roles(config: RunConfig) -> dict[str, str]:
    """The stage's actor names -> their role (launch/roles.py)."""
    from ...launch.plan import build_plan

    return {spec.name: spec.role for spec in build_plan(config).actors}


def _launch(
    stage: Stage, launch: "Launch", show: Show, following: RunConfig | None, early: EarlyLoads
) -> tuple[StageSummary, EarlyLoads]:
    """Place the stage's actors (keeping the previous stage's where its plan names them alike, once their `early`
    loads are settled), check where they landed, start the `following` stage's actors beside them (`_prestart`), set
    them up, run, checkpoint. The run's launch removes everything at its end or on the first error. Returns
    the summary and the following stage's early engine loads."""
    from ...launch.launcher import check_live
    from ...launch.plan import build_plan
    from .factory import role_factory

    started = time.monotonic()
    _settle(launch, early)
    plan = build_plan(stage.config)
    feasibility = check_live(launch.replan(plan))
    show.plan(stage.summary.name, plan, feasibility)
    if not feasibility.ok:
        raise PlacementError(
            [
                Issue(
                    "the launch plan does not fit the Ray cluster; nothing was created",
                    key="placement",
                    source="Ray cluster",
                    hint="; ".join(feasibility.lines),
                )
            ]
        )
    launch.create_groups()
    make = role_factory(stage.config, stage.run_dir.root)
    actors = _started(launch, make)
    stage.restart_actor = lambda name: launch.restart(name, make)  # a dead engine or explorer's replacement
    placements = _placements(launch)
    show.placements(placements, launch.kept)
    misplaced = [p for p in placements if p.problem]
    if misplaced:
        raise RoleFailed(
            f"{len(misplaced)} actor(s) did not land as planned: "
            + "; ".join(f"{p.actor}: {p.problem}" for p in misplaced)
        )
    # the following stage's new actors start (and its engines load) beside this stage's setup: a trainer rank's
    # setup waits on verl's import for seconds with cores to spare
    early = _prestart(launch, following, stage)
    stage.setup(RoleHandles.of(list(plan.actors), actors))
    if stage.endpoints:
        show.endpoints(stage.endpoints, stage.run_dir.endpoints, stage.proxy.url if stage.proxy else None)
    stage.summary.kept = (len(launch.kept), len(plan.actors))
    try:
        stage.summary.setup_s = time.monotonic() - started
        summary = stage.run(loops.loop(stage.mode))
        stage.finish()
    finally:  # the endpoints stop with the stage, however it ends
        stage.stop_proxy()
        if stage.endpoints:
            stage.run_dir.endpoints.unlink(missing_ok=True)
    return summary, early


def _prestart(launch: "Launch", following: RunConfig | None, stage: Stage) -> EarlyLoads:
    """Start the following stage's new actors beside this stage where they fit (Launch.prestart), and have its engines
    load this stage's model meanwhile: that stage keeps them, and a kept vLLM engine that starts alike then only
    loads new weights (another engine loads its model again). Only a speed-up: what fails here is left to that
    stage's own start. Returns {engine: its load}."""
    import ray

    from ...launch.plan import build_plan
    from .factory import role_factory

    if following is None:
        return {}
    plan = build_plan(following)
    try:
        started = set(launch.prestart(plan, role_factory(following, stage.run_dir.root)))
    except ray.exceptions.RayError as exc:
        print(f"note: the next stage's actors were not started early: {_last_line(exc)}", file=sys.stderr)
        return {}
    engines = [a.name for a in plan.actors if a.name in started and a.role == ROLLOUT]
    return {name: launch.actors[name].setup.remote(stage.start.model_path, stage.start.offset) for name in engines}


def _settle(launch: "Launch", early: EarlyLoads) -> None:
    """Wait for the engines' early loads; an engine whose load failed is removed, and the stage starts a new one (whose
    own setup reports what is wrong)."""
    import ray

    failed = []
    for name, load in early.items():
        try:
            ray.get(load, timeout=launch.timeout_s)
        except ray.exceptions.RayError:
            failed.append(name)
    launch.remove(failed)


def _started(launch: "Launch", make: "Make") -> dict[str, object]:
    """The stage's actors, started or kept (a kept one that fails to take the new stage is a failed role)."""
    import ray

    try:
        return launch.start_actors(make)
    except ray.exceptions.RayError as exc:
        raise RoleFailed(f"a kept role actor failed to take the next stage: {_last_line(exc)}") from None


def _placements(launch: "Launch") -> "list[Placement]":
    import ray

    try:
        return launch.placements()
    except ray.exceptions.RayError as exc:  # an actor that cannot even start (a missing package on a node, say)
        raise RoleFailed(f"a role actor failed to start: {_last_line(exc)}") from None


def _last_line(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _resume_point(run_dir: RunDir, config: RunConfig, provenance: Provenance, force: bool) -> Checkpoint | None:
    """The checkpoint to continue from, after checking the saved config describes the same run."""
    latest = run_dir.latest()
    if latest is None:
        return None
    if not config.continue_from_checkpoint:
        raise ConfigError(
            [
                Issue(
                    f"{run_dir.root} already holds checkpoints (last: {latest.path.name}) and "
                    "continue_from_checkpoint is false; nothing is overwritten",
                    key="continue_from_checkpoint",
                    hint="set continue_from_checkpoint: true to resume, or choose another project/name",
                )
            ]
        )
    saved = run_dir.saved_config()
    if saved is not None and not force:
        # a key the saved config lacks came with a newer trinity: it changes the run only if you set it now
        changes = [
            c
            for c in diff(saved, redact(config.model_dump(mode="json")))
            if c.key.startswith(RUN_CHANGING) and (c.left != ABSENT or provenance.set_by(undotted(c.key), *WRITTEN))
        ]
        if changes:
            listed = "; ".join(f"{c.key}: {c.left!r} -> {c.right!r}" for c in changes[:8])
            raise ConfigError(
                [
                    Issue(
                        f"resuming {latest.path.name} with a config that changes the run: {listed}",
                        key="continue_from_checkpoint",
                        source=str(run_dir.config),
                        hint="rerun with --force to resume anyway, or choose another name to start a new run",
                    )
                ]
            )
    return latest
