"""verl's FSDP engines on a trainer that trains its model unsharded (config/unsharded.py): one rank computing in its
weights' dtype, where FSDP2 would only copy.

On that rank FSDP2 copies every weight into a buffer of its own before each unit's forward (and again before its
backward) and every gradient into a reduce-scatter buffer and back: at Qwen2.5-0.5B on 2 CPU cores about 3 s of a 15 s
update, and a unit's weights and gradients twice in memory (benchmarks/scale.py). Here a trained model (the actor, a
critic) is kept as transformers (and PEFT) built it; verl's engine runs such a module on its own paths already
(`fsdp_version(module) == 0`: clipping, offload, gradient sync, the full weights' export; verl's merged-LoRA export
asserts FSDP, and trinity exports LoRA weights its own way: trainer/weights_out.py). Forward-only models (the
reference, a teacher) keep verl's CPU-offloaded FSDP2, which holds their weights in host memory.

Checkpoints: FSDP2's state holds DTensors (on one rank, each the whole tensor), an unsharded model's plain tensors.
Each loads the other's, so a run resumes from a checkpoint whichever way its trainer was built when it was saved.
"""

from typing import Any

import torch
from torch.distributed.tensor import DTensor
from verl.utils.device import get_device_id
from verl.utils.fsdp_utils import fsdp_version
from verl.utils.torch_dtypes import PrecisionType


class Unsharded:
    """Put before verl's FSDP engine class: with `enabled`, a trained model is not wrapped in FSDP2."""

    enabled = False  # engines.install sets it from the run's config (verl builds its engines with no way to pass it)

    def _build_fsdp_module(self, module: torch.nn.Module) -> torch.nn.Module:
        if self.enabled and not self.engine_config.forward_only:
            built = self._unsharded(module)
        else:
            built = super()._build_fsdp_module(module)
        if _whole_tensors(built):
            built.register_load_state_dict_pre_hook(_module_state_as_here)
        return built

    def _unsharded(self, module: torch.nn.Module) -> torch.nn.Module:
        if (ranks := torch.distributed.get_world_size()) != 1:
            raise RuntimeError(f"an unsharded model is trained by one rank, and this trainer has {ranks}")
        dtype = PrecisionType.to_dtype(self.engine_config.mixed_precision["param_dtype"])  # trinity always sets it
        held = {p.dtype for p in module.parameters()}
        if held != {dtype}:  # config/unsharded.py's rule: nothing is cast
            raise RuntimeError(f"an unsharded model computes in its weights' dtype: weights {held}, compute {dtype}")
        self._autocast_dtype = dtype  # verl's forward autocasts to it where narrower than fp32: never here
        return module.to(get_device_id())

    def _build_optimizer(self, module: torch.nn.Module) -> torch.optim.Optimizer:
        optimizer = super()._build_optimizer(module)
        if _whole_tensors(module):
            optimizer.register_load_state_dict_pre_hook(_optimizer_state_as_here)
        return optimizer


def _whole_tensors(module: torch.nn.Module) -> bool:
    """Whether the module's state is whole tensors, plain or DTensors: unsharded, or FSDP2 on one rank. Such states
    load each other (FSDP1 renames and shards its state its own way)."""
    version = fsdp_version(module)
    return version == 0 or (version == 2 and torch.distributed.get_world_size() == 1)


def as_layout(value: Any, like: torch.Tensor) -> Any:
    """`value` (a saved tensor) in the layout of `like` (what loads it): a DTensor of one rank's mesh and a plain tensor
    hold the same values; anything else unchanged."""
    if not isinstance(value, torch.Tensor) or value.shape != like.shape:
        return value
    if isinstance(value, DTensor) and not isinstance(like, DTensor) and value.device_mesh.size() == 1:
        return value.to_local()
    if isinstance(like, DTensor) and not isinstance(value, DTensor) and like.device_mesh.size() == 1:
        return DTensor.from_local(value.to(like.device), like.device_mesh, like.placements, run_check=False)
    return value


def _module_state_as_here(module: torch.nn.Module, state: dict, *_: Any) -> None:
    """A load_state_dict pre-hook of the root module (which sees the whole state): the saved tensors in the layout of
    the module's own."""
    own = module.state_dict(keep_vars=True)
    for key in state.keys() & own.keys():
        state[key] = as_layout(state[key], own[key])


def _optimizer_state_as_here(optimizer: torch.optim.Optimizer, state: dict) -> dict:
    """An optimizer's load_state_dict pre-hook: each parameter's saved moments in the layout of the parameter."""
    saved_ids = [i for group in state["param_groups"] for i in group["params"]]
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for saved_id, param in zip(saved_ids, params, strict=False):
        moments = state["state"].get(saved_id, {})
        for name, value in moments.items():
            moments[name] = as_layout(value, param)
    return state
