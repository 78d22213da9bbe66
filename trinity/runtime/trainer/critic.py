"""The critic (value model) of PPO, beside the actor in each trainer rank: verl's TrainingWorker for a value model.

It starts from `model.critic_model_path` (the actor's start model when that is where it points), with a fresh
one-output value head; it estimates each response token's value before the advantages (GAE) are computed, and
takes one update per batch towards the returns with verl's clipped value loss. Its state is saved beside the
actor's in every checkpoint (`critic_state/`) and loaded on resume.
"""

import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ...config.schema import RunConfig
from . import batch as batches

if TYPE_CHECKING:
    from tensordict import TensorDict
    from verl.workers.config import CriticConfig, EngineConfig

STATE = "critic_state"  # a checkpoint's folder of the critic's verl state
KEYS = ("prompts", "responses", "input_ids", "attention_mask", "position_ids", "response_mask")


def start_model(config: RunConfig, actor_start: str) -> str:
    """Where the critic starts: model.critic_model_path, or, where it names the run's model (upstream's default),
    the model the actor starts this stage from (a previous stage's checkpoint)."""
    path = config.model.critic_model_path
    return actor_start if path in (None, config.model.model_path) else path


def engine(section: "CriticConfig") -> "EngineConfig":
    """verl's critic section's engine, given the critic's batching: verl's engine reads token-balanced micro-batches,
    their token budgets and their sizes from itself, not from the critic's section."""
    engine = section.engine
    engine.use_dynamic_bsz = section.use_dynamic_bsz
    engine.max_token_len_per_gpu = section.ppo_max_token_len_per_gpu
    engine.infer_max_token_len_per_gpu = section.ppo_infer_max_token_len_per_gpu
    engine.micro_batch_size_per_gpu = engine.infer_micro_batch_size_per_gpu = section.ppo_micro_batch_size_per_gpu
    return engine


class Critic:
    """A value model trained by verl's FSDP engine in this trainer rank's process group; `hf_config` is a folder of its
    config as the run changes it (model.rope_*: weights/model_config.py), None for the model's own."""

    def __init__(self, config: RunConfig, model_path: str, total_steps: int, hf_config: str | None = None) -> None:
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.utils.losses import value_loss

        from ..verl.config import build_critic
        from ..verl.workers import TrainingWorker, TrainingWorkerConfig

        section = omega_conf_to_dataclass(build_critic(config, model_path, total_steps, hf_config))
        self.worker = TrainingWorker(
            TrainingWorkerConfig(
                model_type="value_model",
                model_config=section.model,
                engine_config=engine(section),
                optimizer_config=section.optim,
                checkpoint_config=section.checkpoint,
            )
        )
        self.worker.reset()
        self.worker.set_loss_fn(partial(value_loss, config=section))
        self.seed = config.explorer.rollout_model.seed

    def values(self, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """The value of each response token of the padded batch `tensors` (zeros past each response)."""
        from verl.utils import tensordict_utils as tu

        from ..verl.repadding import padded_responses

        td = self._batch(tensors)
        tu.assign_non_tensor(td, compute_loss=False, temperature=1.0)
        out = self.worker.infer_batch(td)
        return padded_responses(tu.get(out, "values"), td).float() * tensors["response_mask"]

    def update(
        self, tensors: dict[str, torch.Tensor], values: torch.Tensor, returns: torch.Tensor, total: int
    ) -> dict[str, float]:
        """One update towards `returns` (verl's value loss, clipped around the `values` the advantages used);
        `total` is the batch size over every rank. Its loss, gradient norm and seconds."""
        from verl.utils import tensordict_utils as tu

        started = time.perf_counter()
        td = self._batch(tensors, values=values, returns=returns)
        meta = dict(global_batch_size=total, mini_batch_size=total, epochs=1, seed=self.seed)
        tu.assign_non_tensor(td, compute_loss=True, temperature=1.0, dataloader_kwargs={"shuffle": False}, **meta)
        metrics = tu.get(self.worker.train_mini_batch(td), "metrics") or {}
        return {
            "critic_loss": batches.metric_mean(metrics.get("critic/vf_loss")),
            "critic_grad_norm": batches.metric_mean(metrics.get("grad_norm")),
            "critic_seconds": time.perf_counter() - started,
        }

    def _batch(self, tensors: dict[str, torch.Tensor], **extra: torch.Tensor) -> "TensorDict":
        from tensordict import TensorDict

        from ..verl.unpadding import unpadded

        columns = {k: tensors[k].clone() for k in KEYS} | extra
        return unpadded(TensorDict(columns, batch_size=[tensors["input_ids"].shape[0]]))

    def save(self, folder: str, step: int) -> None:
        """verl's critic state (model, optimizer, schedule) of this rank under the checkpoint `folder`."""
        self.worker.save_checkpoint(str(Path(folder) / STATE), global_step=step)

    def load(self, folder: str) -> None:
        """The critic state saved under checkpoint `folder`."""
        self.worker.load_checkpoint(str(Path(folder) / STATE))
