"""Ray side of `trinity run`: connect or start Ray, create the plan's groups with a timeout, start
the role actors, check them against the plan, and always tear everything down."""

import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..config.run_target import RunTarget
from ..errors import ClusterError, Issue, PlacementError
from .feasibility import check
from .plan import ActorSpec, LaunchPlan, PlacementGroupSpec
from .reach import unreachable
from .reconcile import Node, live_nodes
from .serialization import JOB_ENV, serialize_without_arrow

LOCAL = "local"  # cluster.ray_address: start a Ray of our own even when one runs on this machine
CLOSE_S = 15  # how long teardown waits for the actors to close before it kills them
EARLY_S = 5  # how long a group for the next stage may keep the running stage waiting (it fitted when checked)


@dataclass(frozen=True)
class Placement:
    """What one actor reported, and whether it matches the plan."""

    actor: str
    node_id: str
    visible_devices: str | None
    device: str
    problem: str = ""


def join(target: RunTarget) -> bool:
    """Join the named cluster, or a Ray already running on this machine; False when there is none (or 'local' asks for a
    new one)."""
    import ray

    if target.address == LOCAL:
        return False
    why = target.address and unreachable(target.address)
    if why:
        raise _unreachable(target, why)
    quiet_abandoned_results()
    try:
        ray.init(
            address=target.address or "auto",
            namespace=target.namespace,
            log_to_driver=False,
            logging_level=logging.WARNING,  # as start_local's: a refusal by preflight's verl check is the only output
            runtime_env=JOB_ENV,
        )
        serialize_without_arrow()
        return True
    except ConnectionError as exc:
        if target.address:
            raise _unreachable(
                target, f"{target.address}: {(str(exc).strip() or type(exc).__name__).splitlines()[0]}"
            ) from None
        return False


def _unreachable(target: RunTarget, why: str) -> ClusterError:
    return ClusterError(
        [
            Issue(
                f"cannot join the Ray cluster: {why}",
                key="cluster.ray_address",
                source=target.address_source,
                hint="write host:port or ray://host[:port]; check that the head node is up (`ray status --address "
                "ADDRESS`), or set cluster.ray_address=local to start a local Ray",
            )
        ]
    )


def start_local(target: RunTarget, cpus: int) -> None:
    """The embedded default: a local Ray with CPU slots enough for the plan (the cpu profile's devices)."""
    import ray

    quiet_abandoned_results()
    ray.init(
        namespace=target.namespace,
        num_cpus=max(os.cpu_count() or 1, cpus),
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,  # it starts while preflight's verl check runs: a refusal is the only output
        runtime_env=JOB_ENV,
    )
    serialize_without_arrow()


def quiet_abandoned_results() -> None:
    """Where a role fails, the driver leaves the other calls in flight (a peer's broadcast to the dead engine ends in
    its own error a moment later): the watcher names the cause, each role's log has its traceback, and Ray would print
    an abandoned call's error again, traceback and all, on the user's stderr when the driver drops it."""
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")


def check_live(plan: LaunchPlan, settle_s: float = 5.0):
    """Feasibility against the cluster's free resources. Ray's view of what is free trails a release
    (say, of the run that just ended) by a heartbeat or two, so a plan that would fit the nodes'
    totals is re-checked for a few seconds before it is called infeasible."""
    nodes = live_nodes()
    result = check(plan, nodes)
    deadline = time.monotonic() + settle_s
    while (
        not result.ok and time.monotonic() < deadline and check(plan, [Node(n.node_id, n.resources) for n in nodes]).ok
    ):
        time.sleep(0.25)
        nodes = live_nodes()
        result = check(plan, nodes)
    return result


def cpus_needed(plan: LaunchPlan) -> int:
    """CPUs the plan asks for, groups and free actors together."""
    in_groups = sum(pg.total().get("CPU", 0) for pg in plan.placement_groups)
    loose = sum(a.options.get("num_cpus", 0) for a in plan.actors if a.placement_group is None)
    return math.ceil(in_groups + loose)


class Launch:
    """Owns every group and actor it creates; leaving the `with` block removes them all. A run's stages go on in one
    launch: `replan` keeps what the next stage's plan names exactly as it runs, and the kept actors take the next
    stage's arguments in their running processes (`Role.restage`)."""

    def __init__(self, plan: LaunchPlan | None, timeout_s: float):
        self.plan, self.timeout_s = plan, timeout_s  # a run's launch starts without one and replans each stage
        self.groups: dict[str, object] = {}
        self.group_specs: dict[str, PlacementGroupSpec] = {}  # name -> the spec each group was created with
        self.actors: dict[str, object] = {}
        self.started: dict[str, tuple[ActorSpec, type]] = {}  # name -> the spec and class each running actor has
        self.closing: list[str] = []  # actors whose class has close()
        self.kept: tuple[str, ...] = ()  # actors the last replan kept running
        self.workdir = os.getcwd()  # where the roles work, on a cluster the run joined as on a Ray of its own

    def __enter__(self) -> "Launch":
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def replan(self, plan: LaunchPlan) -> LaunchPlan:
        """Go on with `plan`: keep the groups and actors it names with the spec they run with, remove every other one;
        returns the part of `plan` still to create (what feasibility is checked on)."""
        groups = {g.name for g in plan.placement_groups if self.group_specs.get(g.name) == g}
        kept = {
            a.name
            for a in plan.actors
            if a.name in self.started
            and self.started[a.name][0] == a
            and (a.placement_group is None or a.placement_group in groups)
        }
        self._remove([n for n in self.actors if n not in kept], [n for n in self.groups if n not in groups])
        self.plan, self.kept = plan, tuple(a.name for a in plan.actors if a.name in kept)
        return replace(
            plan,
            placement_groups=tuple(g for g in plan.placement_groups if g.name not in groups),
            actors=tuple(a for a in plan.actors if a.name not in kept),
        )

    def create_groups(self) -> None:
        """Create each group in plan order and wait for it; a group not ready in time is removed and explained."""
        for spec in self.plan.placement_groups:
            if spec.name in self.groups:  # kept from the stage before
                continue
            if not self._create_group(spec):
                explanation = check(self._pending_plan(spec.name), live_nodes())
                raise PlacementError(
                    [
                        Issue(
                            f"placement group {spec.name} was not placed within {self.timeout_s:g} s; it was removed",
                            key="placement",
                            source="Ray cluster",
                            hint="; ".join(explanation.lines),
                        )
                    ]
                )

    def _create_group(self, spec: PlacementGroupSpec, timeout_s: float | None = None) -> bool:
        """Create one group and wait for it (the launch's timeout, or `timeout_s`); whether it is ready in time (a group
        that is not stays, to be removed)."""
        import ray
        from ray.util.placement_group import placement_group

        group = placement_group([dict(b) for b in spec.bundles], strategy=spec.strategy, name=spec.name)
        self.groups[spec.name], self.group_specs[spec.name] = group, spec
        ready, _ = ray.wait([group.ready()], timeout=self.timeout_s if timeout_s is None else timeout_s)
        return bool(ready)

    def prestart(self, plan: LaunchPlan, make: Callable[[ActorSpec], tuple[type, dict[str, Any]]]) -> tuple[str, ...]:
        """Start now, beside the running stage, the actors of the next stage's `plan` that this stage does not run,
        where they fit in what is free: that stage keeps them (`replan`), so its handover starts no process. Returns
        their names; none when they do not fit."""
        new_groups = [g for g in plan.placement_groups if g.name not in self.groups]
        named = {g.name for g in new_groups}
        actors = [
            a
            for a in plan.actors
            if a.name not in self.actors and (a.placement_group is None or a.placement_group in named)
        ]
        used = {a.placement_group for a in actors}
        early = replace(plan, placement_groups=tuple(g for g in new_groups if g.name in used), actors=tuple(actors))
        if not actors or not check(early, live_nodes()).ok:
            return ()
        for spec in early.placement_groups:
            if not self._create_group(spec, EARLY_S):  # taken meanwhile: the next stage starts them itself
                self._remove([], [g.name for g in early.placement_groups if g.name in self.groups])
                return ()
        for spec in actors:
            self._start(spec, *make(spec))
        return tuple(a.name for a in actors)

    def start_actors(self, make: Callable[[ActorSpec], tuple[type, dict[str, Any]]]) -> dict[str, object]:
        """Start every role actor in its group and bundle, with its env; `make` gives each spec's class and kwargs.
        A kept actor of the same class takes its new kwargs in place (`restage`); one that cannot is replaced."""
        made = {spec.name: make(spec) for spec in self.plan.actors}
        self._restage(made)
        for spec in self.plan.actors:
            if spec.name not in self.actors:
                self._start(spec, *made[spec.name])
        self.actors = {spec.name: self.actors[spec.name] for spec in self.plan.actors}  # plan order
        return dict(self.actors)  # the stage's own: actors started early for the next stage are not its roles

    def _restage(self, made: dict[str, tuple[type, dict[str, Any]]]) -> None:
        same = [name for name in self.kept if self.started[name][1] is made[name][0]]
        refs = [
            self.actors[name].restage.remote(**self._identity(self.started[name][0]), **made[name][1]) for name in same
        ]
        taken = [_took(ref, self.timeout_s) for ref in refs]
        refused = [name for name in self.kept if name not in same] + [n for n, ok in zip(same, taken) if not ok]
        self._remove(refused, [])
        self.kept = tuple(name for name in self.kept if name not in refused)

    def _start(self, spec: ActorSpec, cls: type, kwargs: dict[str, Any]) -> None:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        strategy = None
        if spec.placement_group:
            strategy = PlacementGroupSchedulingStrategy(
                self.groups[spec.placement_group], placement_group_bundle_index=spec.bundle_index
            )
        options = {
            **spec.options,
            "runtime_env": {"env_vars": spec.env},
            **({"scheduling_strategy": strategy} if strategy else {}),
        }
        groups = options.pop("concurrency_groups", None)  # Ray takes them only as the class is made remote
        remote = ray.remote(concurrency_groups=groups)(cls) if groups else ray.remote(cls)
        actor = remote.options(**options).remote(**self._identity(spec), **kwargs)
        if getattr(cls, "WARM", ()):  # heavy imports start now, beside the other roles' setup; setup waits for them
            actor.warm.remote()
        self.actors[spec.name], self.started[spec.name] = actor, (spec, cls)
        # it started processes of its own (vLLM's); a role busy in a collective is not asked
        if hasattr(cls, "close"):
            self.closing.append(spec.name)

    def restart(self, name: str, make: Callable[[ActorSpec], tuple[type, dict[str, Any]]]) -> object:
        """Replace actor `name` (dead, or hung: it is killed) by a new one of the same spec on its own bundle, freed
        once the old process is gone; returns the new handle, set up by the caller. Waits until it answers."""
        import ray

        spec, _ = self.started[name]
        ray.kill(self.actors.pop(name), no_restart=True)
        self.closing = [n for n in self.closing if n != name]
        self._start(spec, *make(spec))
        ray.get(self.actors[name].report.remote(), timeout=self.timeout_s)  # placed and alive
        return self.actors[name]

    def _identity(self, spec: ActorSpec) -> dict[str, Any]:
        return {
            "name": spec.name,
            "role": spec.role,
            "visible_devices_env": self.plan.visible_devices_env,
            "workdir": self.workdir,
        }

    def placements(self) -> list[Placement]:
        """Every actor's report, checked against the plan: node of its bundle, number of visible devices, device."""
        import ray
        from ray.util import placement_group_table

        reports = ray.get([self.actors[a.name].report.remote() for a in self.plan.actors], timeout=self.timeout_s)
        nodes = {name: placement_group_table(group)["bundles_to_node_id"] for name, group in self.groups.items()}
        return [self._judge(spec, report, nodes) for spec, report in zip(self.plan.actors, reports)]

    def _judge(self, spec, report: dict, nodes: dict) -> Placement:
        problems = []
        if spec.placement_group and nodes[spec.placement_group][spec.bundle_index] != report["node_id"]:
            problems.append("not on its bundle's node")
        visible = report["visible_devices"]
        if (
            self.plan.visible_devices_env
            and spec.devices
            and len((visible or "").split(",")) != math.ceil(spec.devices)
        ):
            problems.append(f"sees {visible!r}, planned {spec.devices:g} device(s)")
        if report["device"] != self.plan.device_type:
            problems.append(f"decided device {report['device']!r}")
        return Placement(spec.name, report["node_id"], visible, report["device"], "; ".join(problems))

    def remove(self, actors: list[str]) -> None:
        """Close (where they can) and kill `actors`, as if they had never started."""
        self._remove(actors, [])

    def teardown(self) -> None:
        """Ask the actors that have close() to close, kill every actor, and remove every group this launch created; wait
        until Ray has freed them."""
        self._remove(list(self.actors), list(self.groups))

    def _remove(self, actors: list[str], groups: list[str]) -> None:
        """Close (where they can), kill and forget `actors`, then remove `groups` and wait until Ray has freed them."""
        import ray
        from ray.util.placement_group import remove_placement_group

        closing = [self.actors[name].close.remote() for name in actors if name in self.closing]
        ray.wait(closing, num_returns=len(closing), timeout=CLOSE_S)  # a dead or hung actor is killed all the same
        for name in actors:
            ray.kill(self.actors.pop(name))
            self.started.pop(name, None)
        self.closing = [name for name in self.closing if name not in actors]
        removed = [self.groups.pop(name) for name in groups]
        for name in groups:
            self.group_specs.pop(name, None)
        for group in removed:
            remove_placement_group(group)
        _wait_removed(removed, self.timeout_s)

    def _pending_plan(self, name: str) -> LaunchPlan:
        """The plan reduced to the group that did not fit, checked against what is free now (after removing it)."""
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(self.groups.pop(name))
        self.group_specs.pop(name, None)
        return replace(self.plan, placement_groups=(self.plan.group(name),), actors=())


def _took(restage: Any, timeout_s: float) -> bool:
    """Whether a kept actor took the next stage; one that died meanwhile (say, one started early) is replaced."""
    import ray

    try:
        return ray.get(restage, timeout=timeout_s)
    except ray.exceptions.RayActorError:
        return False


def _wait_removed(groups: list, timeout_s: float) -> None:
    """Removal is asynchronous in Ray; a launch right after this one must see the devices free."""
    from ray.util import placement_group_table

    deadline = time.monotonic() + timeout_s
    while groups and time.monotonic() < deadline:
        groups = [g for g in groups if placement_group_table(g).get("state") != "REMOVED"]
        time.sleep(0.05 if groups else 0)
