"""Methods vLLM mixes into each of its workers (`worker_extension_cls`); the engine calls them with
`collective_rpc`, so every worker of an engine runs them at once, in its own process, on its device.

What crosses `collective_rpc` is plain data only: vLLM's multiprocess engine encodes the arguments
with msgspec and decodes them without types (a dataclass arrives as a dict, a tuple as a list, a
tensor as a list or not at all). So tensor specs travel as `[name, shape, dtype]` lists, memory-sync
weights as safetensors bytes, checkpoint weights as a file path, and tensors themselves only over
the weight-sync group.

Weights load through the worker's `reload_weights` (vLLM's layer-by-layer reload), which works
where the plain `load_weights` does not: vLLM's CPU build packs each linear weight for its kernels
at load time and leaves the parameter empty. A tied output head shares the embedding's weight but
keeps a processed copy of its own, so it is processed again after each load. With LoRA adapters, a
sync's tensors are the adapter's: written as a PEFT folder on the worker's node and added to vLLM's LoRA
manager as a new adapter id per weight version. Nothing here imports vLLM at module level.
"""

from collections.abc import Iterator
from typing import Any

Plain = list  # [name, shape, dtype]: a WeightSpec as it crosses collective_rpc


class WeightSyncWorker:
    """Weight-sync methods of a vLLM worker (`self` is the worker: `rank`, `device`, `parallel_config`, `model_runner`,
    and on vLLM's own workers `reload_weights`)."""

    def trinity_sync_rank(self, first_rank: int) -> int:
        """This worker's rank in the weight-sync group: the engine's first rank plus its worker index.

        A dense engine's data-parallel replicas all say data_parallel_rank 0; vLLM keeps the replica in
        data_parallel_index (vLLM 0.23 and 0.31)."""
        parallel = self.parallel_config
        replica = getattr(parallel, "data_parallel_index", None)
        replica = parallel.data_parallel_rank if replica is None else replica
        return first_rank + (replica or 0) * parallel.world_size + self.rank

    def trinity_join(
        self, backend: str, host: str, port: int, first_rank: int, world_size: int, timeout_s: float
    ) -> int:
        """Join the weight-sync group; returns the rank taken."""
        from ..sync import group

        rank = self.trinity_sync_rank(first_rank)
        self.trinity_group = group.join(backend, host, port, rank, world_size, timeout_s)
        return rank

    def trinity_receive(self, specs: list[Plain], adapter: dict | None = None) -> int:
        """Receive each tensor of `specs` from the trainer's broadcast, in order, into the model (or, given
        `adapter`, as that LoRA adapter version); returns the count.

        Every broadcast is received even when loading fails part-way, so trainer rank 0 never waits for a
        receiver that gave up; the load's error is raised after the last tensor. The tensors arrive a bucket
        (sync/group.py) ahead of the reload: the broadcast runs in bursts instead of waiting on each layer's."""
        from ..sync import group

        shapes = [(shape, dtype) for _, shape, dtype in specs]
        with group.receiving(self.trinity_group, shapes, self.device) as tensors:
            named = zip((name for name, _, _ in specs), tensors, strict=True)
            if adapter is None:
                self._trinity_reload(named)
            else:
                self._trinity_adapter(dict(named), adapter)
        return len(specs)

    def trinity_load(self, source: Any, adapter: dict | None = None) -> int:
        """Load a safetensors file's path (checkpoint sync), a model folder's files' paths (a new stage's weights) or
        safetensors bytes (memory sync) into the model, or given `adapter`, as that LoRA adapter version; returns the
        count."""
        from safetensors.torch import load, load_file

        if isinstance(source, (str, list)):
            paths = [source] if isinstance(source, str) else source
            weights = {name: tensor for path in paths for name, tensor in load_file(path).items()}
        else:
            weights = load(bytes(source))
        if adapter is None:
            self._trinity_reload(iter(weights.items()))
        else:
            self._trinity_adapter(weights, adapter)
        return len(weights)

    def _trinity_adapter(self, weights: dict, adapter: dict) -> None:
        """Write the adapter's version where this worker's node reads it, register it with vLLM's LoRA manager
        under its own id (requests then name it), and drop this engine's older versions' folders."""
        import shutil
        from pathlib import Path

        from ..lora import publish_adapter

        folder = Path(adapter["folder"])
        folder.parent.mkdir(parents=True, exist_ok=True)
        publish_adapter(folder, weights, adapter["config"])
        self.model_runner.add_lora(lora_request(adapter["name"], adapter["id"], str(folder)))
        for old in folder.parent.iterdir():
            if old != folder and not old.name.startswith(f"{folder.name}.draft"):
                shutil.rmtree(old, ignore_errors=True)

    def _trinity_reload(self, weights: Iterator[tuple[str, Any]]) -> None:
        # vLLM's GPU and CPU workers wrap the runner's reload in their config; vllm-ascend's NPUWorker may
        # not have the method, and its runner (a GPUModelRunner) has it
        reload = getattr(self, "reload_weights", None) or self.model_runner.reload_weights
        reload(weights_iterator=weights)
        model = self.model_runner.get_model()
        head = getattr(model, "lm_head", None)
        if head is not None and getattr(model.config, "tie_word_embeddings", False):
            method = getattr(head, "quant_method", None)
            if method is not None:
                method.process_weights_after_loading(head)


def lora_request(name: str, adapter_id: int, path: str) -> Any:
    """vLLM's LoRARequest for an adapter folder (vLLM imported here, in its worker process)."""
    from vllm.lora.request import LoRARequest

    return LoRARequest(name, adapter_id, path)
