"""The rollout engines, one entry each: what every layer needs to know of an `engine_type`.

The config layer reads the plain facts (devices, sleep, KV cache, memory estimate, verl's name); the
runtime imports the engine's class and its preflight check from the dotted paths, and only on the run
path, so config commands never import an engine's packages. Adding an engine is one entry here plus
its own module(s) under trinity/runtime/rollout/.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The rollout-model keys whose product is the devices one engine holds.
PARALLEL_SIZES = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")


@dataclass(frozen=True)
class EngineEntry:
    """One rollout engine type, as plain facts and dotted paths."""

    name: str  # its engine_type
    label: str  # how messages name it
    runtime: str  # "module:Class" of its RolloutEngine subclass (trinity/runtime/rollout/base.py states the contract)
    needs: str  # the Python package it generates with, named when it is missing
    # True: one engine may span TP x PP x DP devices (and nodes); False: one engine drives one device
    parallel: bool
    # Frees its device memory in sleep(), so it can take turns with a trainer on the same devices (colocate).
    sleeps: bool
    # Whether it can sleep here is the hardware's rollout_sleep_mode fact (vLLM's CPU build has no sleep mode).
    sleep_is_hardware_fact: bool
    # How config/memory estimates one engine: "budget" (it takes gpu_memory_utilization x device memory at start,
    # weights, workspace and KV cache inside: memory/rollout.py); None: its memory is not estimated.
    memory: str | None
    kv_cache: bool  # kv_cache_mib sizes its KV cache (the profile's rollout_kv_cache_mib fills it when unset)
    engine_args: bool  # explorer.rollout_model.extra_engine_args are its own arguments (its preflight checks them)
    # verl's rollout.name in the trainer's config. verl builds no rollout here (the engines are trinity's), and
    # "hf" is the name verl takes without packages of its own rollout, whichever engine generates.
    verl_name: str
    # The LoRA settings it honours when it applies adapters itself (derive/lora.py ENGINE_KEYS names them)
    lora_args: tuple[str, ...] = ()
    # The adapter ranks it serves at (a rank is rounded up to one of them); empty: any rank
    lora_ranks: tuple[int, ...] = ()
    # The lora_dtype values it keeps adapters in; empty: any
    lora_dtypes: tuple[str, ...] = ()
    # "module:function" that `trinity run` calls before Ray starts: (stage configs running this engine, resolved)
    # -> issues; None: preflight checks only that `needs` is importable.
    preflight: str | None = None

    def adapter_rank(self, rank: int) -> int:
        """The rank it serves an adapter of rank `rank` at: the smallest of lora_ranks that holds it (vLLM's
        max_lora_rank), or the rank itself."""
        return min((r for r in self.lora_ranks if r >= rank), default=rank)


_ENTRIES = (
    EngineEntry(
        "vllm",
        label="vLLM",
        runtime="trinity.runtime.rollout.vllm_engine:VllmEngine",
        needs="vllm",
        parallel=True,
        sleeps=True,
        sleep_is_hardware_fact=True,
        memory="budget",
        kv_cache=True,
        engine_args=True,
        verl_name="hf",
        lora_args=("max_cpu_loras", "fully_sharded_loras", "lora_dtype"),
        lora_ranks=(1, 8, 16, 32, 64, 128, 256, 320, 512),  # vLLM's max_lora_rank values (vllm/config/lora.py)
        lora_dtypes=("auto", "float16", "bfloat16"),  # vLLM's LoRADType
        preflight="trinity.runtime.rollout.vllm_preflight:issues",
    ),
    EngineEntry(
        "transformers",
        label="transformers",
        runtime="trinity.runtime.rollout.transformers_engine:TransformersEngine",
        needs="transformers",
        parallel=False,
        sleeps=True,  # moves its model to host memory
        sleep_is_hardware_fact=False,
        memory="generate",  # weights, generate's KV cache, scores and logits (config/memory/generate.py)
        kv_cache=False,
        engine_args=False,
        verl_name="hf",
        lora_args=("lora_dtype",),
    ),
)
ENGINES: dict[str, EngineEntry] = {e.name: e for e in _ENTRIES}
# Names Trinity-RFT still accepts for an engine here -> the engine, and why (derive/aliases.py maps them with a note).
# vllm_async: its one vLLM engine was async-only by then, and common/models/allocator.py picks it for any engine_type
# starting with "vllm".
ALIASES: dict[str, tuple[str, str]] = {
    "vllm_async": ("vllm", "Trinity-RFT's former name of its vLLM engine, which runs every request asynchronously"),
}


def engine(name: str) -> EngineEntry:
    """The entry of engine type `name`; a ValueError naming the engine types there are."""
    if name not in ENGINES:
        raise ValueError(
            f"engine_type {name!r} has no engine in this version of trinity (engines: {', '.join(ENGINES)})"
        )
    return ENGINES[name]


def devices_per_engine(section: Any) -> int:
    """Devices one engine of a rollout-model section holds: TP x PP x DP (a mapping or the schema's model)."""
    get = section.get if isinstance(section, Mapping) else lambda key: getattr(section, key)
    return math.prod(get(key) for key in PARALLEL_SIZES)
