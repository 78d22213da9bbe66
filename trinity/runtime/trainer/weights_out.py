"""A trainer rank's weights out to the rollout engines.

Each full weight is gathered from its FSDP shards in turn: a collective every rank takes part in, whose result rank 0
keeps or sends. It travels in the dtype the engines keep it in where that is narrower (half the bytes of a bf16
rollout from an fp32 trainer); with LoRA, as the adapter's matrices or base + adapter merged. The weight-sync method
(config/sync_methods.py) picks the way: a broadcast over the sync group, pieces (rank 0's flat host tensors into
Ray's object store, or the device buffer of each rank beside an engine worker, which that worker maps: the buffer in
the rollout dtype on every such rank, in ordinary segments of the allocator, sync/device_ipc.py), or a file.
"""

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ...config import sync_methods
from ...config.schema import RunConfig
from ...launch.plan import beside_an_engine
from ...platforms import get_platform
from ..weights import lora

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist
    from verl.workers.engine_workers import ActorRolloutRefWorker

    from ..rollout.base import WeightSpec
    from ..sync.device_ipc import Handles

Named = Iterator[tuple[str, "torch.Tensor"]]  # weights by name, one at a time


class WeightsOut:
    """The weights of the `actor` worker as the engines (or a checkpoint) take them."""

    def __init__(
        self, config: RunConfig, rank: int, actor: "ActorRolloutRefWorker", visible_devices_env: str | None
    ) -> None:
        self.config, self.rank, self.actor = config, rank, actor
        self.visible_devices_env = visible_devices_env  # names this rank's device to the engines on it (device_ipc)
        self.lora = lora.adapter_of(config)
        self.beside_engine = beside_an_engine(config, rank)  # device_ipc: an engine worker maps what it exports
        self._plan: list[list[WeightSpec]] = []  # the pieces of a memory sync, as the synchronizer cuts them
        self._pieces: Iterator[torch.Tensor] | None = None  # a memory sync's gathered weights, a piece at a time
        self._exported: torch.Tensor | None = None  # device_ipc: the piece's buffer, kept until the engines load it
        self._restore_segments: Callable[[], None] | None = None  # device_ipc: the allocator's setting to restore

    def full(self) -> dict[str, "torch.Tensor"] | None:
        """Every weight of the model the engines run, as a full CPU tensor on rank 0 (None elsewhere; all ranks must
        call it): with LoRA, what the engines take (the adapter, or base + adapter merged)."""
        return self.on_rank0(self.gathered())

    def for_engines(self) -> dict[str, "torch.Tensor"] | None:
        """`full` as the engines take them (a checkpoint sync's file, published weights): in the rollout dtype where
        that is narrower."""
        return self.on_rank0(self.gathered(rollout_dtype(self.config)))

    def on_rank0(self, pairs: Named) -> dict[str, "torch.Tensor"] | None:
        """`pairs` as CPU tensors on rank 0; the other ranks take part in each gather and keep nothing."""
        if self.rank != 0:
            for _ in pairs:
                pass
            return None
        return {name: tensor.to("cpu") for name, tensor in pairs}

    def gathered(self, narrow: "torch.dtype | None" = None, kind: str | None = None) -> Named:
        """Each full weight in turn (an FSDP gather on every rank); rank 0's cast to `narrow` where that dtype is
        narrower, the other ranks' as gathered (they only take part). With LoRA, `kind` (adapter or merged) says
        which tensors; by default the ones the engines take."""
        if self.lora is None:
            params, _ = self.actor.actor.engine.get_per_tensor_param()
        else:
            params = self._lora_tensors(kind or ("adapter" if lora.moves_adapter(self.config) else "merged"))
        for name, tensor in params:
            if self.rank == 0:
                tensor = tensor.detach()
                dtype = sent_dtype(tensor.dtype, narrow)
                tensor = (tensor if dtype == tensor.dtype else tensor.to(dtype)).contiguous()
            yield name, tensor
            del tensor  # before the next gather: one gathered weight at a time

    def _lora_tensors(self, kind: str) -> Named:
        """The adapter's matrices (PEFT's names), or the plain model with the adapter merged (Hugging Face names).

        Each shard is gathered on its own, on the device (where verl offloads parameters, from the host): a sync of
        the adapter never brings the base onto the device."""
        from torch.distributed.tensor import DTensor
        from verl.utils.device import get_device_id
        from verl.utils.model import convert_weight_keys

        module, device = self.actor.actor.engine.module, get_device_id()
        state = module.state_dict()
        keys = list(state)
        outputs = lora.adapter_outputs(keys) if kind == "adapter" else lora.merged_outputs(keys)
        if kind == "merged":  # the model's own checkpoint names, where transformers maps them
            model = getattr(module, "_fsdp_wrapped_module", module)
            outputs = [
                lora.Output(n, o.keys) for n, o in convert_weight_keys({o.name: o for o in outputs}, model).items()
            ]
        factor = lora.scale(self.lora)
        for output in outputs:
            parts = [
                state[k].to(device).full_tensor() if isinstance(state[k], DTensor) else state[k] for k in output.keys
            ]
            yield output.name, lora.combine(parts, factor)

    # --- by file ---------------------------------------------------------------------------------------------

    def write(self, path: str, version: int) -> None:
        """Rank 0 writes the engines' weights to `path` (atomically), then its marker naming their version."""
        from ...utils.atomic import replace_atomically
        from ..sync import files
        from ..weights.safetensors import save_safetensors

        weights = self.for_engines()
        if self.rank == 0:
            target = Path(path)
            replace_atomically(target, lambda tmp: save_safetensors(weights, tmp))
            files.mark(target, version)

    # --- by a collective or in pieces: the engines learn the weights' specs first ------------------------------

    def specs(self) -> list["WeightSpec"]:
        """Name, shape and dtype of each weight, in the order and dtype `broadcast` and `piece` send them; a memory
        sync's pieces are cut from them as the synchronizer cuts them."""
        from ..rollout.base import WeightSpec
        from ..sync import pieces

        narrow = rollout_dtype(self.config)  # the dtype every rank sends in (nothing is cast to learn it)
        found = [
            WeightSpec(name, tuple(t.shape), str(sent_dtype(t.dtype, narrow)).removeprefix("torch."))
            for name, t in self.gathered()
        ]
        self._plan = pieces.plan(found, self.config.synchronizer.bucket_bytes)
        return found

    def broadcast(self, group: "dist.ProcessGroup | None") -> float:
        """Gather each weight and (rank 0) broadcast it over the sync `group` in the rollout dtype, a piece at a
        time; returns seconds spent."""
        from ..sync import group as groups

        started = time.perf_counter()
        tensors = (tensor for _, tensor in self.gathered(rollout_dtype(self.config)))
        if self.rank == 0:
            groups.send(group, tensors, self.config.synchronizer.bucket_bytes)
        else:
            for _ in tensors:  # every rank takes part in each gather
                pass
        return time.perf_counter() - started

    def piece(self, index: int, count: int) -> "torch.Tensor | Handles | None":
        """Piece `index` of a memory sync, its next `count` weights in the rollout dtype (every rank gathers them).
        object_store: rank 0 returns them as one flat host tensor (into Ray's object store), the others None.
        device_ipc: a rank beside an engine worker returns {device key: handle} of a flat buffer on its device, kept
        until the next piece or `end_pieces`; the others return {} (a handle nobody opens would pin its buffer)."""
        from ..sync import pieces

        if self.config.synchronizer.sync_channel == sync_methods.DEVICE_IPC:
            return self._export(index, count)
        if index == 0:
            self._pieces = (tensor for _, tensor in self.gathered(rollout_dtype(self.config)))
        piece = [next(self._pieces) for _ in range(count)]
        return pieces.flatten(piece, "cpu") if self.rank == 0 else None

    def _export(self, index: int, count: int) -> "Handles":
        """The piece as one buffer on this rank's device in the rollout dtype, filled a weight at a time as FSDP
        gathers it (cast as it is copied in), in an ordinary segment of the allocator; kept, and its handle under
        the device's key. A rank with no engine worker beside it only takes part in the gathers."""
        import torch

        from ..sync import device_ipc, pieces

        if index == 0:
            self._pieces = (tensor for _, tensor in self.gathered())
            if self.beside_engine:
                self._restore_segments = device_ipc.ordinary_segments(*self._allocator())
        if not self.beside_engine:
            for _ in range(count):
                next(self._pieces)
            return {}
        specs = self._piece_specs(index, count)
        self._exported = None  # the previous piece's buffer: every engine has loaded it
        device = torch.accelerator.current_accelerator() or torch.device("cpu")
        self._exported = pieces.filled(specs, (next(self._pieces) for _ in specs), device)
        index_here = torch.accelerator.current_device_index() if torch.accelerator.is_available() else 0
        return device_ipc.export(self._exported, device_ipc.device_key(self.visible_devices_env, index_here))

    def _piece_specs(self, index: int, count: int) -> list["WeightSpec"]:
        """The specs of piece `index`, as `specs` cut them (listed now where no sync asked for them yet)."""
        if not self._plan:
            self.specs()
        specs = self._plan[index]
        if len(specs) != count:
            raise ValueError(f"piece {index} holds {len(specs)} weights here, and the synchronizer asked for {count}")
        return specs

    def _allocator(self) -> tuple[str, str | None]:
        """This rank's device type and the variable its caching allocator reads its settings from."""
        platform = get_platform(self.config.hardware.device_type)
        return platform.device_type, platform.alloc_conf_env

    def end_pieces(self) -> None:
        """A memory sync is done: drop its last buffer, let the device free what the engines mapped, restore the
        allocator's segments, and hand the gathered weights' cached blocks back before the engines generate beside
        them."""
        from ...utils.device import empty_cache
        from ..sync import device_ipc

        exported, self._exported = self._exported, None
        self._pieces = None
        self._restore()
        if exported is not None:
            del exported
            device_ipc.release(self.config.hardware.device_type)
            empty_cache()

    def drop_pieces(self) -> None:
        """Forget what a memory sync left (the rank is kept for another stage, which syncs anew)."""
        self._pieces, self._exported = None, None
        self._restore()

    def _restore(self) -> None:
        restore, self._restore_segments = self._restore_segments, None
        if restore is not None:
            restore()


def rollout_dtype(config: RunConfig) -> "torch.dtype":
    """The dtype the engines keep what a sync moves in: the rollout dtype, or an adapter's lora_dtype."""
    import torch

    wanted, adapter = config.explorer.rollout_model.dtype, lora.adapter_of(config)
    if lora.moves_adapter(config) and adapter.lora_dtype != "auto":
        wanted = adapter.lora_dtype
    return getattr(torch, wanted)


def sent_dtype(dtype: "torch.dtype", narrow: "torch.dtype | None") -> "torch.dtype":
    """The dtype a weight travels in: `narrow` where it is a narrower floating dtype, else its own."""
    return narrow if narrow is not None and dtype.is_floating_point and narrow.itemsize < dtype.itemsize else dtype
