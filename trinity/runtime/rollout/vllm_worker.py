"""Methods vLLM mixes into each of its workers (`worker_extension_cls`); the engine calls them with
`collective_rpc`, so every worker of an engine runs them at once, in its own process, on its device.

Each worker joins trinity's weight-sync group as a rank of its own (the same group module the trainer
uses, on the backend the profile derived: nccl, or hccl which torch_npu registers), receives every
tensor trainer rank 0 broadcasts, and hands it to the model's `load_weights`, which shards it for
tensor parallelism and maps Hugging Face names onto vLLM's fused layers. Nothing here imports vLLM.
"""

from typing import Any


class WeightSyncWorker:
    """Weight-sync methods of a vLLM worker (`self` is the worker: `rank`, `device`, `parallel_config`, `get_model`)."""

    def trinity_sync_rank(self, first_rank: int) -> int:
        """This worker's rank in the weight-sync group: the engine's first rank plus its index among the engine's workers."""
        parallel = self.parallel_config
        return first_rank + (parallel.data_parallel_rank or 0) * parallel.world_size + self.rank

    def trinity_join(self, backend: str, host: str, port: int, first_rank: int, world_size: int, timeout_s: float) -> int:
        """Join the weight-sync group; returns the rank taken."""
        from ..sync import group

        rank = self.trinity_sync_rank(first_rank)
        self.trinity_group = group.join(backend, host, port, rank, world_size, timeout_s)
        return rank

    def trinity_receive(self, specs: list) -> int:
        """Receive each tensor of `specs` from the trainer's broadcast, in order, into the model; returns the count."""
        import torch

        from ..sync import group

        model = self.get_model()
        for spec in specs:
            buffer = torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device=self.device)
            group.broadcast(self.trinity_group, buffer)
            model.load_weights([(spec.name, buffer)])
        return len(specs)

    def trinity_load(self, weights: Any) -> int:
        """Load a safetensors file (checkpoint sync) or (name, tensor) pairs (memory sync); returns the count."""
        from .base import named_weights

        pairs = list(named_weights(weights))
        self.get_model().load_weights(pairs)
        return len(pairs)
