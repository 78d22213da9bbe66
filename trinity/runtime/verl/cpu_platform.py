"""verl's `cpu` platform, built from our `cpu` platform record.

verl 0.9.1 knows only accelerators (`nvidia`, `huawei`, ...): on a machine without one it falls
back to CUDA and fails. Importing this module (verl does, when VERL_USE_EXTERNAL_MODULES names it)
registers a `cpu` platform in verl's own registry, the FSDP engines (policy and critic) for device `cpu` in verl's
engine registry, turns off the pinned CPU offload verl forces on forward-only models (pinning
needs an accelerator), and loads a critic's value model with the configured attention rather than
flash-attention (a CUDA kernel). Nothing here pretends to be CUDA.
"""

from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

from ...platforms import PLATFORMS

RECORD = PLATFORMS["cpu"]


class _HostDevice:
    """`torch.cpu` plus the calls verl makes on every device module (memory statistics, caches, RNG)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    def get_device_name(self, *_args) -> str:
        return "CPU"  # not in verl's FLOPS table: MFU reads 0 instead of a made-up number

    def max_memory_allocated(self, *_args) -> int:
        return 0  # the host's memory is reported per role as peak RSS instead

    max_memory_reserved = memory_allocated = memory_reserved = max_memory_allocated

    def empty_cache(self) -> None:
        return None

    ipc_collect = empty_cache

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    def get_rng_state(self, *_args):
        return torch.get_rng_state()

    def set_rng_state(self, state, *_args) -> None:
        torch.set_rng_state(state)

    def mem_get_info(self, *_args) -> tuple[int, int]:
        import psutil

        memory = psutil.virtual_memory()
        return memory.available, memory.total


_HOST = _HostDevice()


@PlatformRegistry.register(platform=RECORD.verl_platform)
class CPUPlatform(PlatformBase):
    """The host CPU as verl's device: gloo collectives, no Ray accelerator resource."""

    @property
    def device_name(self) -> str:
        return RECORD.device_type

    @property
    def vendor_name(self) -> str:
        return RECORD.verl_platform

    @property
    def device_module(self) -> ModuleType:
        return _HOST  # type: ignore[return-value]

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:  # verl does tensor.to(current_device()): an index would mean an accelerator
        return RECORD.device_type

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return RECORD.collective_backend

    def visible_devices_envvar(self) -> str:
        return "TRINITY_CPU_VISIBLE_DEVICES"  # Ray sets none for the CPU; verl only reads it

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return RECORD.ray_resource_key

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        return {"num_cpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


def _no_pinned_offload(**_kwargs):
    """verl forces CPUOffloadPolicy(pin_memory=True) on forward-only models; on the CPU they already live in host
    memory."""
    return None


def _value_model(local_path, torch_dtype, model_config, trust_remote_code):
    """verl's critic loader asks transformers for flash_attention_2 (a CUDA kernel) and, failing, needs trl; on the
    CPU the value model (a token classifier with one label) loads with the attention the config names (sdpa)."""
    from transformers import AutoModelForTokenClassification

    return AutoModelForTokenClassification.from_pretrained(
        pretrained_model_name_or_path=local_path,
        torch_dtype=torch_dtype,
        config=model_config,
        attn_implementation=getattr(model_config, "_attn_implementation", None) or "sdpa",
        trust_remote_code=trust_remote_code,
    )


def _register_engine() -> None:
    # verl's engine modules ask for the platform at import time, so they come after the registration above.
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl

    # the policy (language model) and, for PPO, the critic (value model)
    for model_type, engine in (
        ("language_model", transformer_impl.FSDPEngineWithLMHead),
        ("value_model", transformer_impl.FSDPEngineWithValueHead),
    ):
        EngineRegistry.register(model_type=model_type, backend="fsdp2", device=RECORD.device_type)(engine)
    transformer_impl.CPUOffloadPolicy = _no_pinned_offload
    from verl.utils import model

    model.load_valuehead_model = _value_model  # transformer_impl imports it when it builds a critic


_register_engine()
