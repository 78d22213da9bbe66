"""One trainer rank: the role the driver calls (protocols.TrainerCalls), verl's FSDP2 worker behind it.

The rank hands each call to the module whose one job it is:
- worker_setup: the trainer's process group and verl's workers (actor, reference, teacher, critic), at setup;
- step: each train step's batch (rank 0 takes it and scatters shards), its advantages over the whole batch, the update;
- weights_out: the weights gathered on every rank (an FSDP collective) and sent to the engines by rank 0, or over
  device IPC by every rank beside an engine worker: broadcast, pieces, a file;
- checkpoint: verl's state per rank and rank 0's Hugging Face files, loaded again on resume.
"""

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...config.schema import RunConfig
from ...launch.plan import ActorSpec
from ...utils.imports import lazy_module
from ..roles.base import Role
from . import worker_setup
from .checkpoint import Checkpoint
from .step import Step
from .weights_out import WeightsOut

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist
    from ray.actor import ActorHandle

    from ..rollout.base import WeightSpec
    from ..sync.device_ipc import Handles
    from .worker_setup import Workers

# Ray imports this module wherever a rank's handle is taken (the synchronizer): what holds torch loads on first use
sampling = lazy_module("trinity.runtime.trainer.sampling")


class TrainerRank(Role):
    """A verl actor worker on one device; the constructor is light, `setup` builds the model."""

    WARM = ("trinity.runtime.verl.workers",)

    @classmethod
    def plan_arguments(cls, config: RunConfig, spec: ActorSpec, run_dir: Path) -> dict[str, Any]:
        """Rank `spec.rank` of the run's trainer ranks."""
        return {"config": config, "rank": spec.rank, "world_size": config.cluster.trainer_gpu_num or 0}

    def __init__(self, *, config: RunConfig, rank: int, world_size: int, **identity: Any) -> None:
        super().__init__(**identity)
        self.config, self.rank, self.world_size = config, rank, world_size
        self.sync_group: dist.ProcessGroup | None = None  # the weight-sync group: rank 0 hosts it and sends on it
        # what setup builds, one per job
        self.workers: Workers | None = None
        self.steps: Step | None = None
        self.weights: WeightsOut | None = None
        self.checkpoint: Checkpoint | None = None

    def release(self) -> None:
        """Leave this stage's weight-sync group (torch would keep it and its communicator registered) and drop what a
        memory sync left."""
        from ..sync import group

        group.leave(self.sync_group)
        self.sync_group = None
        if self.weights is not None:
            self.weights.drop_pieces()

    def restage(self, **kwargs: Any) -> bool:
        """The next stage's rank in this process, its trainer process group kept: a stage with another world size or
        backend starts new ranks, and so does one that turns fused kernels off (verl patches them into the model
        class, for the whole process)."""
        trainer, mine = kwargs["config"].trainer, self.config.trainer
        if (kwargs["world_size"], kwargs["rank"], trainer.process_group_backend, trainer.use_fused_kernels) != (
            self.world_size,
            self.rank,
            mine.process_group_backend,
            mine.use_fused_kernels,
        ):
            return False
        return super().restage(**kwargs)

    def rendezvous(self) -> tuple[str, int]:
        """Address and a free port on this node for the trainer's process group (asked of rank 0)."""
        import ray

        from ..sync.group import free_port

        return ray.util.get_node_ip_address(), free_port()

    def setup(
        self, host: str, port: int, model_path: str, total_steps: int, buffer: "ActorHandle", resume: str | None = None
    ) -> dict:
        """Join the trainer group, build verl's worker(s), load `resume` (a checkpoint's trainer state)."""
        started = time.perf_counter()
        worker_setup.join_group(self.config, self.rank, self.world_size, host, port)
        self.workers = worker_setup.build(self.config, model_path, total_steps, self.log)
        self.weights = WeightsOut(self.config, self.rank, self.workers.actor, self.visible_devices_env)
        self.checkpoint = Checkpoint(self.workers, self.weights)
        if resume:
            self.checkpoint.load(resume)
        sampler = None
        if self.rank == 0:  # rank 0 alone takes the batches
            sampler = sampling.Sampler(self.config, buffer, sampling.expert_data(self.config, self.workers.base))
        self.steps = Step(self.config, self.rank, self.world_size, self.workers, sampler)
        return {"rank": self.rank, "seconds": time.perf_counter() - started}

    def train_step(self, step: int) -> dict | None:
        """One update on `train_batch_size` experiences (step.Step.train); rank 0 returns its metrics."""
        return self.steps.train(step)

    def save(self, folder: str, step: int, hf: bool) -> None:
        """verl's trainer state per rank; on rank 0 also Hugging Face files: the model, or with LoRA the adapter
        (PEFT's layout) and, if trainer.save_merged_model, the merged model in merged/."""
        self.checkpoint.save(folder, step, hf)

    # --- weights out (weights_out.py) -----------------------------------------------------------------------

    def full_weights(self) -> dict[str, "torch.Tensor"] | None:
        """Every weight of the model the engines run, as a full CPU tensor on rank 0 (None elsewhere; all ranks must
        call it)."""
        return self.weights.full()

    def engine_weights(self) -> dict[str, "torch.Tensor"] | None:
        """`full_weights` as the engines take them: in the rollout dtype where that is narrower."""
        return self.weights.for_engines()

    def write_weights(self, path: str, version: int) -> None:
        """Rank 0 writes the engines' weights to `path` (atomically), then its marker naming their version."""
        self.weights.write(path, version)

    def weight_specs(self) -> list["WeightSpec"]:
        """Name, shape and dtype of each weight, in the order and dtype `broadcast_weights` sends them."""
        return self.weights.specs()

    def join_sync_group(self, backend: str, host: str, port: int, world_size: int, timeout_s: float) -> None:
        """Rank 0 hosts the weight-sync group and is its sender; a group it held is left first (formed anew once a
        replaced engine joins: driver/replace.py)."""
        from ..sync import group

        group.leave(self.sync_group)
        self.sync_group = None
        self.sync_group = group.join(backend, host, port, 0, world_size, timeout_s, self.config.synchronizer.group_name)

    def broadcast_weights(self) -> float:
        """Gather each weight and (rank 0) broadcast it to the engines in the rollout dtype; returns seconds spent."""
        return self.weights.broadcast(self.sync_group)

    def weight_piece(self, index: int, count: int) -> "torch.Tensor | Handles | None":
        """Piece `index` of a memory sync, its next `count` weights (WeightsOut.piece)."""
        return self.weights.piece(index, count)

    def end_weight_pieces(self) -> None:
        """A memory sync is done: its last buffer and the gathered weights' cached blocks go back to the device."""
        self.weights.end_pieces()

    def hand_back_device_memory(self) -> float:
        """Before the engines sharing these devices wake (colocate): hand the blocks torch's allocator caches (the
        update's activations and gradients) back to the device, as verl does before it resumes rollout; returns the
        MiB torch still reserves (what the trainer keeps while the engines run), 0 without an accelerator."""
        import torch

        from ...utils.device import empty_cache

        if not torch.accelerator.is_available():
            return 0.0
        torch.accelerator.synchronize()
        empty_cache()
        module = torch.get_device_module(torch.accelerator.current_accelerator())
        return module.memory_reserved() / 2**20
