"""Changes that would make a check fit: each is tried by re-running the estimate, and the first that
fits comfortably (else the first that fits at all) of each kind is offered, written as an override."""

from collections.abc import Callable, Iterable

from .. import modes
from ..engines import devices_per_engine
from ..schema import RunConfig
from ..schema.explorer import InferenceModelConfig
from .checks import TIGHT, Knob, length_key, shared_device_check, status, trainer_capacity
from .estimate import Item
from .rollout import EngineSetup, engine_estimate
from .trainer import TrainerSetup, trainer_estimate

Candidate = tuple[str, object, str]  # (override, changed setup, what it means)
TP_SIZES = (2, 4, 8, 16, 32)
UTILIZATION_STEP = 0.05
MAX_UTILIZATION = 0.95  # vLLM needs some memory outside its budget
MAX_NODES_FACTOR = 8  # look for up to 8 times the nodes
LENGTH_STEP = 256


def trainer_knobs(config: RunConfig, setup: TrainerSetup, memory: int) -> tuple[Knob, ...]:
    """More trainer devices, fewer tokens per micro-batch, gradient checkpointing."""
    capacity, _ = trainer_capacity(config, memory)

    def need(s: TrainerSetup) -> int:
        return trainer_estimate(s).peak

    kinds = [
        [(change, setup._replace(devices=n), f"{n} trainer devices") for change, n in kind]
        for kind in _device_changes(config, setup.devices)
    ]
    kinds.append(_token_changes(config, setup))
    if not setup.checkpointing:
        kinds.append([("trainer.enable_gradient_checkpointing=true", setup._replace(checkpointing=True), "")])
    return _first_of_each(kinds, need, capacity)


def engine_knobs(
    config: RunConfig, key: str, engine: InferenceModelConfig, setup: EngineSetup, memory: int
) -> tuple[Knob, ...]:
    """Higher tensor parallelism, a larger budget, a shorter context."""

    def need(s: EngineSetup) -> int:
        return engine_estimate(s).peak

    per_node = config.cluster.gpu_per_node or 1
    tp = [
        (f"{key}.tensor_parallel_size={t}", setup._replace(tensor_parallel=t), "")
        for t in TP_SIZES
        if t > setup.tensor_parallel
        and t * setup.pipeline_parallel <= per_node
        and setup.shape.heads % t == 0
        and _devices_suffice(config, engine, t)
    ]
    knobs = list(_first_of_each([tp], need, setup.budget))
    knobs += [k for k in (_utilization(key, engine, setup, memory), _shorter_context(config, key, engine, setup)) if k]
    return tuple(knobs)


def colocate_knobs(
    key: str, engine: InferenceModelConfig, setup: EngineSetup, trainer: TrainerSetup, memory: int, weights: Item
) -> tuple[Knob, ...]:
    """Offload what the trainer keeps between updates, or give vLLM less (`weights`: vLLM's part of the device during
    a weight sync, which no knob here changes)."""

    def shared(budget: int, trainer: TrainerSetup) -> int:
        return shared_device_check(key, Item("", budget), weights, trainer, memory).need

    offloads = [
        ("trainer.param_offload=true", trainer._replace(param_offload=True)),
        ("trainer.optimizer_offload=true", trainer._replace(optimizer_offload=True)),
        (
            "trainer.param_offload=true trainer.optimizer_offload=true",
            trainer._replace(param_offload=True, optimizer_offload=True),
        ),
    ]
    knobs = _first_of_each(
        [[(c, t, "") for c, t in offloads if t != trainer]], lambda t: shared(setup.budget, t), memory
    )
    for share in _utilizations(engine.gpu_memory_utilization, lower=True):
        budget = int(share * memory)
        starts = engine_estimate(setup._replace(budget=budget)).peak <= budget
        if starts and status(shared(budget, trainer), memory) == "fits":
            return knobs + (Knob(f"{key}.gpu_memory_utilization={share:.2f}", shared(budget, trainer)),)
    return knobs


def _first_of_each(kinds: Iterable[list[Candidate]], need: Callable, capacity: int) -> tuple[Knob, ...]:
    """Per kind, the first candidate that fits (else the first that is only tight)."""
    knobs = []
    for kind in kinds:
        tried = [Knob(change, need(changed), effect) for change, changed, effect in kind]
        for wanted in ("fits", "tight"):
            best = next((k for k in tried if status(k.need, capacity) == wanted), None)
            if best:
                knobs.append(best)
                break
    return tuple(knobs)


def _device_changes(config: RunConfig, devices: int) -> list[list[tuple[str, int]]]:
    """Per kind (fewer engines, more devices per node, more nodes): (override, trainer devices) in order."""
    cluster, per_node, nodes = config.cluster, config.cluster.gpu_per_node, config.cluster.node_num
    split = modes.mode(config.mode).splits_devices  # the trainer gets what rollout leaves
    explorer = cluster.explorer_gpu_num if split else 0
    kinds = [
        [
            (f"cluster.gpu_per_node={g}", nodes * g - explorer, g)
            for g in range(per_node + 1, config.hardware.devices_per_node + 1)
        ]
    ]
    kinds.append(
        [
            (f"cluster.node_num={k}", k * per_node - explorer, per_node)
            for k in range(nodes + 1, nodes * MAX_NODES_FACTOR + 1)
        ]
    )
    if split:
        engine = config.explorer.rollout_model
        per_engine = devices_per_engine(engine)
        fewer = [
            (f"explorer.rollout_model.engine_num={e}", devices + (engine.engine_num - e) * per_engine, per_node)
            for e in range(engine.engine_num - 1, 0, -1)
        ]
        kinds.insert(0, fewer)
    return [[(change, n) for change, n, node in kind if n > devices and _splits(n, node)] for kind in kinds]


def _devices_suffice(config: RunConfig, engine: InferenceModelConfig, tensor_parallel: int) -> bool:
    """Whether the cluster still splits when this engine's tensor parallelism changes."""
    cluster = config.cluster
    per_engine = engine.pipeline_parallel_size * engine.data_parallel_size
    explorer = cluster.explorer_gpu_num + engine.engine_num * per_engine * (
        tensor_parallel - engine.tensor_parallel_size
    )
    if not modes.mode(config.mode).splits_devices:
        return explorer <= cluster.total_gpu_num
    return _splits(cluster.total_gpu_num - explorer, cluster.gpu_per_node)


def _splits(trainer: int, per_node: int) -> bool:
    # the trainer's devices must fit one node or fill whole nodes (derive/cluster.py)
    return trainer > 0 and (trainer <= per_node or trainer % per_node == 0)


def _token_changes(config: RunConfig, setup: TrainerSetup) -> list[Candidate]:
    if not config.trainer.use_dynamic_bsz:
        return []  # already one sequence per micro-batch
    shortest = config.model.max_model_len or LENGTH_STEP  # verl packs whole sequences: no budget below one
    tokens, changes = setup.tokens // 2, []
    while tokens >= shortest:
        changes.append((f"trainer.max_token_len_per_gpu={tokens}", setup._replace(tokens=tokens), ""))
        tokens //= 2
    return changes


def _utilization(key: str, engine: InferenceModelConfig, setup: EngineSetup, memory: int) -> Knob | None:
    for share in _utilizations(engine.gpu_memory_utilization, lower=False):
        budget = int(share * memory)
        need = engine_estimate(setup._replace(budget=budget)).peak
        if status(need, budget) == "fits":
            return Knob(f"{key}.gpu_memory_utilization={share:.2f}", need)
    return None


def _utilizations(current: float, lower: bool) -> list[float]:
    steps = [round(i * UTILIZATION_STEP, 2) for i in range(1, int(MAX_UTILIZATION / UTILIZATION_STEP) + 1)]
    return sorted((s for s in steps if s < current), reverse=True) if lower else [s for s in steps if s > current]


def _shorter_context(config: RunConfig, key: str, engine: InferenceModelConfig, setup: EngineSetup) -> Knob | None:
    """The longest max_model_len (in steps of 256) whose one sequence fits comfortably."""
    one = setup.max_model_len * setup.kv_bytes_per_token
    fixed = engine_estimate(setup).peak - one
    length = int((TIGHT * setup.budget - fixed) // setup.kv_bytes_per_token) // LENGTH_STEP * LENGTH_STEP
    response = config.model.max_response_tokens or 0
    if not (response < length < setup.max_model_len and length >= LENGTH_STEP):
        return None
    return Knob(f"{length_key(config, key, engine)}={length}", fixed + length * setup.kv_bytes_per_token)
