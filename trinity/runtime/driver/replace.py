"""A dead rollout engine or explorer is replaced while its stage goes on (issue 49): a new actor of the same spec on
its own bundle (free once the old process is gone: Launch.restart), set up as at the stage's start, the explorer told
of a new engine (a new explorer set up with the engines and its selectors' feedback up to the steps done), and, for an
engine, the weight-sync group formed again with every member (a collective that included the dead engine cannot go
on). The loop (loops/both.py) settles the jobs in flight, has the roles replaced, syncs the trainer's current weights
and runs the failed jobs again. Each restart is asked of the run's budget (restarts.py) and recorded: a metrics line
(role "restart"), a text event in the monitor, a progress line and the stage's summary.

The loop of a stage that only explores (loops/explore.py) replaces them alike and runs the failed explore step or
evaluation again, the engines then loading the newest weights a train run published. Not replaced in place (their
death restarts a stage that trains from its last checkpoint: stage_restart.py; else it ends the run): an engine
spanning several nodes (one actor per node, started together: launch/plan.py engine_parts), an auxiliary model's
engine, engines sharing the trainer's devices (colocate), a stage its launch did not give a way to start actors
(in-process tests), and a failure whose cause is no such death.
A vLLM engine's own processes (its EngineCore, its workers) are in its actor's process group, which the raylet sends
SIGTERM when the actor dies (they were gone 2 s after a SIGKILL here): the new engine starts on devices they left.
"""

from typing import TYPE_CHECKING, Any

from ...launch.plan import engine_parts
from ...launch.roles import AUXILIARY, EXPLORER, ROLLOUT
from .blame import LOST_PEER, Failure
from .health import EngineHealth
from .restarts import Restart
from .watcher import RoleFailed

if TYPE_CHECKING:
    from .stage import Stage

REPLACED = (ROLLOUT, EXPLORER)


def refusal(stage: "Stage") -> str | None:
    """Why the stage's engines and explorer are not replaced when they die; None when they are."""
    if stage.restart_actor is None or stage.budget is None:
        return "its launch starts no replacement"
    if stage.mode.shares_devices:
        return f"mode {stage.config.mode}: the engines share the trainer's devices"
    parts, _ = engine_parts(stage.config.explorer.rollout_model, stage.config.cluster.gpu_per_node, colocate=False)
    if stage.engines and parts > 1:
        return f"an engine spans {parts} nodes, whose parts start together (not one part anew)"
    return None


def watch_health(stage: "Stage") -> EngineHealth | None:
    """Health-check the stage's engines between the watcher's waits (health.py), where they are replaced when hung;
    None where they are not (or the watcher is a test's)."""
    if not stage.engines or refusal(stage) or not hasattr(stage.watcher, "on_poll"):
        return None
    section = stage.config.fault_tolerance
    health = EngineHealth(lambda: _engines(stage), section.engine_health_interval_s, section.engine_health_timeout_s)
    stage.watcher.on_poll = health.poll
    return health


def unwatch_health(stage: "Stage") -> None:
    if hasattr(stage.watcher, "on_poll"):
        stage.watcher.on_poll = None


def _engines(stage: "Stage") -> dict[str, Any]:
    """The stage's rollout engines by name, as they are now."""
    return {name: h for name, h in stage.handles.actors.items() if any(h is e for e in stage.engines)}


def dead_roles(stage: "Stage", failed: RoleFailed) -> list[str]:
    """The roles whose death `failed` is, when each can be replaced and every other failure in it is a consequence (a
    peer that lost it); [] when the failure is to end the run."""
    failures: tuple[Failure, ...] = failed.failures
    if not failures or not failures[0].died or refusal(stage):
        return []
    dead = list(dict.fromkeys(f.role for f in failures if f.died))
    if any(f.rank != LOST_PEER for f in failures if not f.died):
        return []
    return dead if all(role_of(stage, name) in REPLACED for name in dead) else []


def role_of(stage: "Stage", name: str | None) -> str | None:
    """The role (launch/roles.py) of actor `name` of the stage; None for no actor of it."""
    handle = stage.handles.actors.get(name) if name else None
    return next((r for r, handles in stage.handles.roles.items() if any(h is handle for h in handles)), None)


def grant(stage: "Stage", names: list[str], failed: RoleFailed, step: int) -> list[Restart]:
    """A restart of each of `names` from the run's budget; where it has none left for one, none is granted and
    `failed` is raised, saying the budget is spent (as is, where max_restarts 0 asked for the fail-stop)."""
    causes = {f.role: f.headline for f in failed.failures}
    granted = []
    for name in names:
        restart = stage.budget.grant(name, causes.get(name, str(failed).partition("\n")[0]), step)
        if restart is None:
            stage.budget.take_back(granted)
            spent = f"the restart budget is spent ({stage.budget.spent()})"
            raise failed.refused(spent) if stage.budget.most else failed
        granted.append(restart)
    return granted


def say_why_not(stage: "Stage", failed: RoleFailed) -> None:
    """A progress line where the failure is the death of an engine or the explorer that the stage does not replace
    in place (the stage may restart from its last checkpoint instead: stage_restart.py)."""
    cause = failed.failures[0] if failed.failures else None
    role = role_of(stage, cause.role) if cause and cause.died else None
    why = "it is an auxiliary model's engine" if role == AUXILIARY else refusal(stage) if role in REPLACED else None
    if cause and why:
        stage.progress.note(f"{cause.role} is not replaced in place: {why}")


def replace(stage: "Stage", names: list[str], done: int) -> None:
    """Start a new actor for each of `names` and set it up: an engine loads the stage's weights (a sync gives it the
    current ones next) and the explorer is told of it; a new explorer is set up with the engines, and its selectors'
    feedback replayed to step `done`. An engine's weight-sync group is formed again with every member."""
    new = {name: stage.restart_actor(name) for name in names}
    for name, handle in new.items():
        _swap(stage, name, handle)
    engines = [name for name in names if role_of(stage, name) == ROLLOUT]
    version = stage.start.offset + stage.start.done
    stage.wait([engine.setup.remote(stage.engine_weights, version) for engine in (new[n] for n in engines)])
    if EXPLORER in {role_of(stage, name) for name in names}:
        stage.wait([stage.setup_explorer(done)])
    elif engines:
        replaced = [i for i, handle in enumerate(stage.engines) if any(handle is new[n] for n in engines)]
        stage.wait([stage.explorer.replace_engines.remote(stage.engines, replaced)])
    if engines and stage.synchronizer:
        stage.synchronizer.setup(stage.ranks, stage.engines)  # a collective's group is formed anew, every member in it


def replace_or_raise(stage: "Stage", names: list[str], restarts: list[Restart], failed: RoleFailed, done: int) -> None:
    """`replace`, or where it fails, its restarts given back to the budget, why on a line, and the death that needed it
    raised."""
    try:
        replace(stage, names, done)
    except Exception as exc:  # noqa: BLE001 (the death that needed it stands; why it failed, on a line)
        stage.budget.take_back(restarts)
        said = str(exc).strip().splitlines()
        stage.progress.note(f"replacing {', '.join(names)} failed: {said[-1] if said else type(exc).__name__}")
        raise failed from None


def _swap(stage: "Stage", name: str, new: Any) -> None:
    """Actor `name`'s handle is now `new` wherever the stage holds it (its actors, the watcher's, role lists, the
    synchronizer's engines: the same objects)."""
    old = stage.handles.actors[name]
    stage.handles.actors[name] = new
    for handles in stage.handles.roles.values():
        handles[:] = [new if h is old else h for h in handles]
    if stage.explorer is old:
        stage.explorer = new


def recorded(stage: "Stage", restarts: list[Restart], seconds: float, sync: str | None) -> None:
    """Each restart in the run's records: a metrics line with a text event in the monitor, and a progress line (the
    summary lists the run budget's restarts: driver/run.py)."""
    most = stage.budget.most
    for restart in restarts:
        count = stage.budget.recent()
        line = {"cause_role": restart.role, "cause": restart.cause, "attempt": count, "max_restarts": most}
        line |= {"seconds": round(seconds, 2)} | ({"sync": sync} if sync else {})
        text = f"replaced {restart.role} after {restart.cause} (restart {count} of {most})"
        stage.metrics.event("restart", stage.start.offset + restart.step, stage.name, text, **line)
        stage.progress.note(text + (f"; {sync}" if sync else ""))
