"""vLLM's engine arguments and process layout for one rollout actor, as pure data from the resolved config.

Nothing here imports vLLM: the preflight of `trinity run` and the tests check these arguments against
the EngineArgs fields of vLLM's source (`vllm_fields`), and the engine hands them to AsyncEngineArgs.

How vLLM's workers map onto the actors of the launch plan:
- An engine that fits one actor (the plan gives it all its devices in one bundle) runs vLLM's
  multiprocessing executor inside that actor: one worker process per device the actor holds, on the
  devices Ray made visible to it. The executor is always named: inside a placement group vLLM would
  pick its Ray executor by itself and wait forever for bundles the plan has already handed out.
- An engine that spans several actors (`rollout.engineN.partK`: one per node it spans, or one per
  device in colocate mode) is one vLLM multi-node engine: each part is a "node" of the
  multiprocessing executor (nnodes = parts, node_rank = K) with its own devices. Part 0 is the head:
  it runs the engine (scheduler, generate, collective_rpc) and publishes its address; the other parts
  run headless workers and pass the generate calls they receive to the head.
- Weight sync: every vLLM worker is one rank of the weight-sync group (world size = rollout devices
  + 1, derived by the config layer). Engine E's workers take ranks 1 + E x devices_per_engine onward,
  in vLLM's own worker order; the head asks all of them to join through collective_rpc.
"""

from dataclasses import dataclass
from typing import Any

from ...config import engines, modes
from ...config.schema import RunConfig
from ...launch.plan import engine_parts
from ..weights import model_config
from ..weights.lora import adapter_of, moves_adapter

WORKER_EXTENSION = "trinity.runtime.rollout.vllm_worker.WeightSyncWorker"
# Log-probs of the distribution each token was sampled from (after temperature, top-k, top-p): what the
# trainer recomputes; vLLM's default reports the raw logits' log-probs instead.
LOGPROBS_MODE = "processed_logprobs"
# Set before vLLM is imported. Workers are spawned: forking a Ray worker process copies its threads.
ENGINE_ENV = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}


@dataclass(frozen=True)
class Topology:
    """Where one rollout actor sits in its engine."""

    engine: int  # engine index
    part: int  # this actor's part of the engine; 0 is the head
    parts: int  # actors the engine spans
    devices: int  # devices this actor's vLLM workers use
    per_engine: int  # devices (and vLLM workers) of the whole engine

    @property
    def is_head(self) -> bool:
        """Whether this actor runs the engine itself."""
        return self.part == 0

    def first_sync_rank(self, position_rank: int) -> int:
        """First weight-sync rank of this engine's workers; `position_rank` is what the synchronizer
        passes an engine actor (its position among the rollout actors + 1, one rank per actor)."""
        return 1 + (position_rank - 1) // self.parts * self.per_engine


def topology(config: RunConfig, slot: int) -> Topology:
    """The topology of the rollout actor at `slot` (the plan's engine x parts + part)."""
    parts, devices = engine_parts(config.explorer.rollout_model, config.cluster.gpu_per_node, _shares_devices(config))
    return Topology(slot // parts, slot % parts, parts, devices, parts * devices)


# set by trinity only for some layouts
LAYOUT_ARGS = (
    "max_model_len",
    "nnodes",
    "node_rank",
    "master_addr",
    "master_port",
)
# set by trinity only when the engines apply a LoRA adapter
LORA_ARGS = ("enable_lora", "max_lora_rank", "max_loras", "max_cpu_loras", "fully_sharded_loras", "lora_dtype")
# vLLM's own LoRA settings trinity leaves at vLLM's defaults: set beside an adapter they would change what it applies
LORA_KEPT = ("lora_target_modules", "default_mm_loras", "max_lora_cls_labels")
# Set by trinity only when the config asks: never an extra_engine_args name either.
OPTIONAL_ARGS = (*LAYOUT_ARGS, *LORA_ARGS, *LORA_KEPT, "kv_cache_memory_bytes", "max_logprobs", "hf_overrides")
MIB = 2**20


def engine_kwargs(
    config: RunConfig, model_path: str, topo: Topology, head: tuple[str, int] | None = None
) -> dict[str, Any]:
    """AsyncEngineArgs keyword arguments for this actor: the user's extra_engine_args under trinity's own."""
    return config.explorer.rollout_model.extra_engine_args | own_kwargs(config, model_path, topo, head)


def own_kwargs(
    config: RunConfig, model_path: str, topo: Topology, head: tuple[str, int] | None = None
) -> dict[str, Any]:
    """The engine arguments trinity sets from the config; `head` is the head part's (address, port) when the engine
    spans actors."""
    rollout = config.explorer.rollout_model
    kwargs = {
        "model": model_path,
        "tokenizer": model_path,
        "trust_remote_code": config.model.trust_remote_code,
        "dtype": rollout.dtype,
        "seed": rollout.seed + topo.engine,  # every part of an engine samples alike; engines differ
        "tensor_parallel_size": rollout.tensor_parallel_size,
        "pipeline_parallel_size": rollout.pipeline_parallel_size,
        "data_parallel_size": rollout.data_parallel_size,
        "gpu_memory_utilization": rollout.gpu_memory_utilization,
        "enforce_eager": rollout.enforce_eager,
        "enable_prefix_caching": rollout.enable_prefix_caching,
        "enable_chunked_prefill": rollout.enable_chunked_prefill,
        "distributed_executor_backend": "mp" if topo.per_engine > 1 else "uni",
        "worker_extension_cls": WORKER_EXTENSION,
        "enable_sleep_mode": sleep_mode(config),  # trainer and engine take turns on each device
        "logprobs_mode": LOGPROBS_MODE,
        "disable_log_stats": True,
        "enable_log_requests": rollout.enable_log_requests,  # vLLM logs each request it takes, with its sampling
    }
    changed = model_config.overrides(config, model_path)
    if changed:  # the model config the trainer also runs with (model.rope_scaling, model.rope_theta)
        kwargs["hf_overrides"] = changed
    if rollout.max_model_len:
        kwargs["max_model_len"] = rollout.max_model_len
    top = top_logprobs(config)
    if top:  # vLLM refuses a request asking for more than max_logprobs (its default, 20)
        kwargs["max_logprobs"] = top
    if rollout.kv_cache_mib:  # an explicit size; vLLM then ignores gpu_memory_utilization for the KV cache
        kwargs["kv_cache_memory_bytes"] = rollout.kv_cache_mib * MIB
    if _shares_devices(config) and topo.per_engine > 1:
        # each part sees the one device it shares with a trainer rank; vLLM's custom all-reduce (CUDA) maps a peer's
        # rank into the visible devices (index 1 of a one-device list) and fails at start: NCCL's all-reduce instead
        kwargs["disable_custom_all_reduce"] = True
    if topo.parts > 1:  # the LAYOUT_ARGS
        if head is None:
            raise ValueError("an engine spanning several actors needs its head's address")
        kwargs.update(nnodes=topo.parts, node_rank=topo.part, master_addr=head[0], master_port=head[1])
    return kwargs | lora_kwargs(config)


def top_logprobs(config: RunConfig) -> int:
    """The most top-k log-probs a task set asks of the engines (rollout_args.logprobs; 0: none)."""
    explorer_input = config.buffer.explorer_input
    tasksets = [*explorer_input.training, *explorer_input.eval_tasksets]
    return max((t.rollout_args.logprobs or 0 for t in tasksets), default=0)


def lora_kwargs(config: RunConfig) -> dict[str, Any]:
    """The LORA_ARGS: one adapter slot, at the smallest rank vLLM serves that holds the adapter's."""
    if not moves_adapter(config):
        return {}
    lora, entry = adapter_of(config), engines.engine(config.explorer.rollout_model.engine_type)
    kwargs = {
        "enable_lora": True,
        "max_lora_rank": entry.adapter_rank(lora.lora_rank),
        "max_loras": 1,  # every request of a batch runs the current weight version's adapter
        "fully_sharded_loras": config.model.fully_sharded_loras,
        "lora_dtype": lora.lora_dtype,
    }
    if config.model.max_cpu_loras is not None:
        kwargs["max_cpu_loras"] = config.model.max_cpu_loras
    return kwargs


def engine_env(config: RunConfig, topo: Topology) -> dict[str, str]:
    """Variables this rollout actor sets before importing vLLM: its own cores where the profile binds engines
    (hardware.rollout_core_binding), else none."""
    binding = config.hardware.rollout_core_binding
    if binding is None:
        return {}
    cores = config.cluster.gpu_per_node  # where engines are bound, the node's devices are its CPU slots, one core each
    sharing = _engines_per_node(config, topo, cores)
    k = topo.engine % sharing
    first, end = k * cores // sharing, (k + 1) * cores // sharing
    return {binding.env: _worker_ranges(first, end, topo.devices), **binding.fixed}


def _engines_per_node(config: RunConfig, topo: Topology, cores: int) -> int:
    """Engines sharing one node, counted as the plan's PACK group fills nodes in order; a part of an engine
    spanning nodes has its node to itself."""
    if topo.parts > 1:
        return 1
    return max(1, min(config.explorer.rollout_model.engine_num, cores // topo.devices))


def _worker_ranges(first: int, end: int, workers: int) -> str:
    """Cores first..end-1 split into one range per vLLM worker, in vLLM's `a-b|c-d` form."""
    bounds = [first + w * (end - first) // workers for w in range(workers + 1)]
    return "|".join(f"{lo}-{hi - 1}" for lo, hi in zip(bounds, bounds[1:]))


def layout_problem(config: RunConfig) -> str | None:
    """Why vLLM cannot run this engine layout, or None."""
    rollout = config.explorer.rollout_model
    parts, _ = engine_parts(rollout, config.cluster.gpu_per_node, _shares_devices(config))
    if parts > 1 and rollout.data_parallel_size > 1:
        return (
            f"an engine spanning {parts} actors runs as one vLLM multi-node engine, which takes no "
            f"data_parallel_size ({rollout.data_parallel_size})"
        )
    return None


def sleep_mode(config: RunConfig) -> bool:
    """Whether vLLM starts with its sleep mode: where the trainer takes turns with it on the devices."""
    return _shares_devices(config)


def _shares_devices(config: RunConfig) -> bool:
    return modes.mode(config.mode).shares_devices  # the modes table says (config/modes.py)
