"""The launch plan: placement groups and role actors as plain data, built from the resolved config.

Nothing here imports Ray. The launcher turns each actor's `options` into `.options(**options,
scheduling_strategy=<its group and bundle>, runtime_env={"env_vars": env})`.
"""

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config import modes
from ..config.engines import devices_per_engine
from ..config.run_target import run_namespace
from ..config.schema import RunConfig
from .roles import AUXILIARY, BUFFER, EXPLORER, ROLLOUT, TRAINER
from .runtime_env import EXPORTED, role_env, secret_vars

CPUS_PER_DEVICE = 1
COLOCATE_SHARE = 0.5  # where they share devices, the trainer and a rollout engine each take half of a device


STEPS_GROUP = "steps"  # the explorer's concurrency group of explore steps and evaluations


def inflight_batches(config: RunConfig) -> int:
    """Explore steps the explorer runs at once: explorer.max_inflight_batches under sync_style fully_async
    (Trinity-RFT's batches in flight), else 1."""
    return config.explorer.max_inflight_batches if config.synchronizer.sync_style == "fully_async" else 1


def explorer_groups(config: RunConfig) -> dict[str, int]:
    """The explorer's concurrency groups: under sync_style fully_async, STEPS_GROUP runs its batches in flight and an
    evaluation at once; otherwise none, one call at a time."""
    if config.synchronizer.sync_style != "fully_async":
        return {}
    return {STEPS_GROUP: inflight_batches(config) + 1}


@dataclass(frozen=True)
class PlacementGroupSpec:
    name: str
    strategy: str  # PACK or STRICT_PACK
    bundles: tuple[dict[str, float], ...]

    def total(self) -> dict[str, float]:
        """Resources of all bundles together."""
        out: dict[str, float] = {}
        for bundle in self.bundles:
            for key, value in bundle.items():
                out[key] = out.get(key, 0) + value
        return out


@dataclass(frozen=True)
class ActorSpec:
    name: str
    role: str  # its entry in the roles table (roles.py)
    placement_group: str | None
    bundle_index: int | None
    options: dict[str, Any]  # keyword arguments of Ray's .options() (concurrency_groups: of ray.remote())
    env: dict[str, str]  # runtime_env env vars
    env_exported: tuple[str, ...] = ()  # variables whose value came from the driver's environment
    devices: float = 0  # devices the actor holds (for checks and display)
    rank: int = 0  # trainer rank, or rollout slot (engine x parts + part); 0 for the single roles
    env_masked: tuple[str, ...] = ()  # variables holding a credential whatever their names (masked where shown)


@dataclass(frozen=True)
class LaunchPlan:
    hardware: str
    resource_key: str
    visible_devices_env: str | None
    namespace: str
    device_type: str
    placement_groups: tuple[PlacementGroupSpec, ...] = ()
    actors: tuple[ActorSpec, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready data (the `--dry-run --format json` contract)."""
        return asdict(self)

    def group(self, name: str) -> PlacementGroupSpec:
        return next(pg for pg in self.placement_groups if pg.name == name)


def build_plan(config: RunConfig, exported: Mapping[str, str] | None = None) -> LaunchPlan:
    """Placement groups (trainer first: STRICT_PACK per node; rollout: PACK) and every role actor."""
    hw, cluster = config.hardware, config.cluster
    builder = _Builder(config, exported)
    mode = modes.mode(config.mode)
    colocate = mode.shares_devices
    if cluster.trainer_gpu_num:
        share, processes = (COLOCATE_SHARE, 2) if colocate else (1, 1)
        for node in range(cluster.trainer_node_num):
            builder.group(
                f"trainer_node{node}",
                "STRICT_PACK",
                [builder.bundle(1, processes * CPUS_PER_DEVICE)] * cluster.trainer_gpu_num_per_node,
            )
            for i in range(cluster.trainer_gpu_num_per_node):
                rank = node * cluster.trainer_gpu_num_per_node + i
                builder.actor(
                    f"trainer_node{node}.rank{rank}", TRAINER, f"trainer_node{node}", i, share, CPUS_PER_DEVICE, rank
                )
    if cluster.rollout_gpu_num:
        if colocate:
            builder.colocated_engines(config.explorer.rollout_model)
        else:
            builder.engines(ROLLOUT, config.explorer.rollout_model)
    slot = 0  # each auxiliary engine's rank: its slot among every auxiliary model's, in order
    for i, model in enumerate(auxiliary_models(config)):
        slot = builder.engines(f"{AUXILIARY}{i}", model, AUXILIARY, slot)
    if mode.explores:
        builder.actor(EXPLORER, EXPLORER, None, None, 0, 1, groups=explorer_groups(config))
    if mode.buffers:
        builder.actor(BUFFER, BUFFER, None, None, 0, 0)  # stores and forwards: no CPU slot of its own
    namespace = run_namespace(config.ray_namespace, config.project, config.name)
    return LaunchPlan(
        hw.name,
        hw.ray_resource_key,
        hw.visible_devices_env,
        namespace,
        hw.device_type,
        tuple(builder.groups),
        tuple(builder.actors),
    )


def auxiliary_models(config: RunConfig) -> list:
    """The auxiliary models whose engines start (cluster.explorer_gpu_num counts their devices beside the rollout
    engines'): none where the mode runs no engines."""
    counted = (config.cluster.explorer_gpu_num or 0) > (config.cluster.rollout_gpu_num or 0)
    return list(config.explorer.auxiliary_models) if counted else []


def auxiliary_slot(config: RunConfig, rank: int) -> tuple[int, int]:
    """(auxiliary model, its engine slot: engine x parts + part) of auxiliary rank `rank` (plan order)."""
    for i, model in enumerate(config.explorer.auxiliary_models):
        parts, _ = engine_parts(model, config.cluster.gpu_per_node, colocate=False)
        if rank < model.engine_num * parts:
            return i, rank
        rank -= model.engine_num * parts
    raise ValueError(f"auxiliary rank beyond the {len(config.explorer.auxiliary_models)} auxiliary models' engines")


def beside_an_engine(config: RunConfig, rank: int) -> bool:
    """Whether trainer rank `rank` shares its device with a rollout engine's worker: where trainer and engines take
    turns on the devices, rollout slot s takes the other half of trainer rank s's bundle (`colocated_engines`), so the
    first cluster.rollout_gpu_num ranks do and the others (fewer engine devices than trainer ranks) do not."""
    return modes.mode(config.mode).shares_devices and rank < (config.cluster.rollout_gpu_num or 0)


def engine_parts(model, gpu_per_node: int, colocate: bool) -> tuple[int, int]:
    """(actors one engine spans, devices each holds): one actor per node it spans (whole nodes, checked
    when resolving); in colocate one actor per device, beside a trainer rank."""
    per_engine = devices_per_engine(model)
    if colocate:
        return per_engine, 1
    parts = per_engine // gpu_per_node if per_engine > gpu_per_node else 1
    return parts, per_engine // parts


class _Builder:
    """Accumulates groups and actors; knows how this hardware asks Ray for devices."""

    def __init__(self, config: RunConfig, exported: Mapping[str, str] | None):
        self.config, self.hw, self.exported = config, config.hardware, exported
        self.groups: list[PlacementGroupSpec] = []
        self.actors: list[ActorSpec] = []
        self.envs: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {}  # role -> (env, exported names)

    def bundle(self, devices: float, cpus: float) -> dict[str, float]:
        """A bundle's resources; without an accelerator (ray_request none) the CPUs are the devices."""
        return {**self._ask(devices), "CPU": cpus} if self.hw.ray_request != "none" else {"CPU": cpus}

    def _ask(self, devices: float) -> dict[str, float]:
        return {self.hw.ray_resource_key: devices} if devices and self.hw.ray_request != "none" else {}

    def options(self, devices: float, cpus: float) -> dict[str, Any]:
        """Ray's .options() for this hardware: num_gpus=n for GPU, resources={key: n} otherwise (Ray rejects
        resources={"GPU": n})."""
        ask = self._ask(devices)
        if ask and self.hw.ray_request == "num_gpus":
            return {"num_cpus": cpus, "num_gpus": devices}
        return {"num_cpus": cpus, **({"resources": ask} if ask else {})}

    def group(self, name: str, strategy: str, bundles: list[dict[str, float]]) -> None:
        self.groups.append(PlacementGroupSpec(name, strategy, tuple(dict(b) for b in bundles)))

    def actor(
        self,
        name: str,
        role: str,
        group: str | None,
        index: int | None,
        devices: float,
        cpus: float,
        rank: int = 0,
        groups: dict[str, int] | None = None,
    ) -> None:
        if role not in self.envs:
            env = role_env(self.config, role, self.exported)
            self.envs[role] = (
                {k: v for k, (v, _) in env.items()},
                tuple(k for k, (_, origin) in env.items() if origin == EXPORTED),
                tuple(k for k in secret_vars(self.config, role) if k in env),
            )
        env, exported, secret = self.envs[role]
        # one env dict per role, shared
        options = self.options(devices, cpus) | ({"concurrency_groups": groups} if groups else {})
        self.actors.append(ActorSpec(name, role, group, index, options, env, exported, devices, rank, secret))

    def engines(self, name: str, model, role: str = ROLLOUT, first: int = 0) -> int:
        """One bundle per engine per node it spans (PACK); one actor per bundle holding all of it, ranked from
        `first`; returns the rank after the last."""
        parts, size = engine_parts(model, self.config.cluster.gpu_per_node, colocate=False)
        self.group(name, "PACK", [self.bundle(size, size * CPUS_PER_DEVICE)] * (model.engine_num * parts))
        for engine in range(model.engine_num):
            for part in range(parts):
                suffix = f".part{part}" if parts > 1 else ""
                self.actor(
                    f"{name}.engine{engine}{suffix}",
                    role,
                    name,
                    engine * parts + part,
                    size,
                    size * CPUS_PER_DEVICE,
                    first + engine * parts + part,
                )
        return first + model.engine_num * parts

    def colocated_engines(self, model) -> None:
        """Colocate: each rollout engine takes the other half of consecutive trainer bundles."""
        per_engine, _ = engine_parts(model, self.config.cluster.gpu_per_node, colocate=True)
        per_node = self.config.cluster.trainer_gpu_num_per_node
        for engine in range(model.engine_num):
            for part in range(per_engine):
                slot = engine * per_engine + part
                suffix = f".part{part}" if per_engine > 1 else ""
                self.actor(
                    f"{ROLLOUT}.engine{engine}{suffix}",
                    ROLLOUT,
                    f"trainer_node{slot // per_node}",
                    slot % per_node,
                    COLOCATE_SHARE,
                    CPUS_PER_DEVICE,
                    slot,
                )
