"""The memory plan of a resolved run config: every check, the models it read, what it could not check."""

from collections.abc import Callable
from typing import NamedTuple

from .. import engines, modes
from ..algorithms.queries import uses_teacher
from ..schema import RunConfig
from ..schema.explorer import InferenceModelConfig
from .catalog import FoundShape, NoShape, find_shape
from .checks import (
    Check,
    budget_item,
    engine_check,
    engine_setup,
    generate_check,
    generate_setup,
    loading_item,
    peak_item,
    sequences_check,
    shared_device_check,
    trainer_check,
    trainer_setup,
    weights_awake_item,
)
from .estimate import GIB, Item
from .lora import LAYER_LINEARS, ROOT_MODULES, Adapter, adapter_params, unknown_modules
from .trainer import TrainerSetup


class Unchecked(NamedTuple):
    """A part of the plan that was not checked, and why."""

    key: str
    reason: str
    hint: str = ""
    source: str = ""  # where to point the user; empty: where the key's value was written


class TrainedAdapter(NamedTuple):
    """The LoRA adapter the trainer trains: its model, shape, parameter count, and what the engines hold."""

    model: str
    adapter: Adapter
    parameters: int
    share: float  # of the model's parameters
    lora_sync: str  # adapter: the engines apply it; merged: they hold plain weights


class MemoryPlan(NamedTuple):
    """Every check of one run config, the models it read, and what it could not check."""

    hardware: str
    device_memory: int | None
    models: tuple[FoundShape, ...] = ()
    checks: tuple[Check, ...] = ()
    unchecked: tuple[Unchecked, ...] = ()
    lora: TrainedAdapter | None = None

    @property
    def fits(self) -> bool:
        """No hard check is over its capacity."""
        return not any(c.hard and c.status == "does not fit" for c in self.checks)


class _Plan:
    """The plan being built for one config."""

    def __init__(self, config: RunConfig, memory: int):
        self.config, self.memory = config, memory
        self.models: dict[str, FoundShape] = {}
        self.checks: list[Check] = []
        self.unchecked: list[Unchecked] = []
        self.lora: TrainedAdapter | None = None

    def shape(self, path: str | None, key: str) -> FoundShape | None:
        found = find_shape(path) if path else NoShape("", "no model is named")
        if isinstance(found, NoShape):
            self.unchecked.append(
                Unchecked(
                    key,
                    f"memory fit not checked: {found.reason}",
                    "give the model's local folder (with its config.json) to have it checked",
                )
            )
            return None
        self.models.setdefault(found.name, found)
        return found

    def add(self, check: Check, knobs: Callable[[], tuple]) -> None:
        """Add a check; one that is not comfortable gets the changes that would make it fit."""
        self.checks.append(check if check.status == "fits" else check._replace(knobs=knobs()))


def plan_memory(config: RunConfig) -> MemoryPlan:
    """The memory plan of one resolved run config (the root's or a stage's)."""
    hw = config.hardware
    if hw is None or hw.memory_gb_per_device is None:
        name = hw.name if hw else "the"
        reason = f"memory fit not checked: the {name} profile states no device memory (facts.memory_gb_per_device)"
        unchecked = Unchecked(
            "hardware.memory_gb_per_device",
            reason,
            "add it to the profile's facts to have memory checked",
            hw.source if hw else "",
        )
        return MemoryPlan(name, None, unchecked=(unchecked,))
    plan = _Plan(config, int(hw.memory_gb_per_device * GIB))
    trainer = _trainer(plan)
    _engines(plan, trainer)
    models, checks, unchecked = tuple(plan.models.values()), tuple(plan.checks), tuple(plan.unchecked)
    return MemoryPlan(hw.name, plan.memory, models, checks, unchecked, plan.lora)


def _trainer(plan: _Plan) -> TrainerSetup | None:
    config = plan.config
    if not config.cluster.trainer_gpu_num:
        return None
    found = plan.shape(config.model.model_path, "model.model_path")
    teacher = None
    if found and uses_teacher(config.algorithm.advantage_fn):
        teacher = plan.shape(config.model.teacher_model_path, "model.teacher_model_path")
        if teacher is None:  # unchecked, and said so: the trainer's total would leave the teacher out
            return None
    setup = found and trainer_setup(config, found.shape, config.cluster.trainer_gpu_num, teacher and teacher.shape)
    if found and setup is None:
        plan.unchecked.append(
            Unchecked(
                "model.max_model_len",
                "memory fit of the trainer not checked: its tokens per micro-batch are unknown",
                "set model.max_model_len or trainer.max_token_len_per_gpu",
            )
        )
    if setup:
        plan.add(
            trainer_check(config, setup, plan.memory, found.name),
            lambda: _knobs().trainer_knobs(config, setup, plan.memory),
        )
        _trained_adapter(plan, found, setup)
    return setup or None


def _trained_adapter(plan: _Plan, found: FoundShape, setup: TrainerSetup) -> None:
    if setup.lora is None:
        return
    count = adapter_params(found.shape, setup.lora)
    sync = plan.config.synchronizer.lora_sync
    plan.lora = TrainedAdapter(found.name, setup.lora, count, count / found.shape.params, sync)
    _uncounted_modules(plan)


def _uncounted_modules(plan: _Plan) -> None:
    """A note for LoRA target names the estimate has no shape for: it counts no adapter for them."""
    loras = plan.config.model.lora_configs
    unknown = unknown_modules(loras[0].target_modules) if loras else []
    if unknown:
        plan.unchecked.append(
            Unchecked(
                "model.lora_configs[0].target_modules",
                f"memory fit counts no LoRA adapter for {', '.join(map(repr, unknown))}: the estimate knows "
                f"{', '.join(LAYER_LINEARS + ROOT_MODULES)}",
                "name the model's linear modules by their leaf names, or all-linear",
            )
        )


def _engines(plan: _Plan, trainer: TrainerSetup | None) -> None:
    config = plan.config
    if not config.cluster.explorer_gpu_num:
        return
    models = [("explorer.rollout_model", config.explorer.rollout_model)] if config.cluster.rollout_gpu_num else []
    # each auxiliary model's engines, on devices of their own (cluster.explorer_gpu_num counts them)
    auxiliary = config.cluster.explorer_gpu_num > (config.cluster.rollout_gpu_num or 0)
    models += [
        (f"explorer.auxiliary_models[{i}]", m) for i, m in enumerate(config.explorer.auxiliary_models) if auxiliary
    ]
    for key, engine in models:
        estimate = ESTIMATES.get(engines.engine(engine.engine_type).memory)
        if estimate is not None:  # an engine without an estimate is not checked
            estimate(plan, key, engine, trainer)


def _budget_engine(plan: _Plan, key: str, engine: InferenceModelConfig, trainer: TrainerSetup | None) -> None:
    """An engine that takes gpu_memory_utilization x device memory at start: vLLM's memory (memory/rollout.py)."""
    config, memory = plan.config, plan.memory
    found = plan.shape(engine.model_path, f"{key}.model_path")
    setup = found and engine_setup(config, engine, found.shape, memory)
    if found and setup is None:
        plan.unchecked.append(_no_length(key))
    if not setup:
        return
    start = engine_check(key, engine, setup, memory, found.name)
    plan.add(start, lambda: _knobs().engine_knobs(config, key, engine, setup, memory))
    if start.status == "does not fit":
        return  # the engine does not start: how many sequences would fit says nothing more
    plan.checks.append(sequences_check(config, key, engine, setup, found.name))

    awake = (budget_item(engine, setup), weights_awake_item(config, engine, setup))

    def knobs() -> tuple:
        return _knobs().colocate_knobs(key, engine, setup, trainer, memory, awake[1])

    _shared(plan, key, f"{key}.gpu_memory_utilization", awake, trainer, knobs)


def _generate_engine(plan: _Plan, key: str, engine: InferenceModelConfig, trainer: TrainerSetup | None) -> None:
    """An engine that runs Hugging Face generate: weights, generate's batch, a weight sync (memory/generate.py)."""
    found = plan.shape(engine.model_path, f"{key}.model_path")
    setup = found and generate_setup(plan.config, engine, found.shape)
    if found and setup is None:
        plan.unchecked.append(_no_length(key))
    if not setup:
        return
    check = generate_check(key, engine, setup, plan.memory, found.name)
    plan.add(check, tuple)  # no knob: its only levers are the run's shape (sequences, lengths) or another engine
    _shared(plan, key, check.key, (peak_item(engine, check), loading_item(engine, check)), trainer, tuple)


def _shared(
    plan: _Plan,
    key: str,
    issue_key: str,
    awake: tuple[Item, Item],
    trainer: TrainerSetup | None,
    knobs: Callable[[], tuple],
) -> None:
    """colocate: the engine (`awake`: generating, and taking a weight sync) beside what the trainer holds then, on one
    device."""
    if modes.mode(plan.config.mode).shares_devices and trainer is not None and key == "explorer.rollout_model":
        plan.add(shared_device_check(issue_key, *awake, trainer, plan.memory), knobs)


def _no_length(key: str) -> Unchecked:
    return Unchecked(
        f"{key}.max_model_len",
        f"memory fit of {key} not checked: its max_model_len is unknown",
        "set model.max_model_len",
    )


# EngineEntry.memory -> how the plan checks one engine of that kind
ESTIMATES: dict[str, Callable[[_Plan, str, InferenceModelConfig, TrainerSetup | None], None]] = {
    "budget": _budget_engine,
    "generate": _generate_engine,
}


def _knobs():
    # Searching for changes that fit is needed only when a check does not fit comfortably.
    from . import knobs

    return knobs
