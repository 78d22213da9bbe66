"""verl's workers on one trainer rank, built at setup: the trainer's process group, then the actor (FSDP2, with a
fresh LoRA adapter where the run trains one) and the models beside it that the algorithm asks for: the reference, the
distillation teacher, the critic.

Nothing here imports torch or verl until `join_group` and `build` run: Ray imports the rank's module wherever a
handle to it is taken (the driver takes every rank's).
"""

import datetime
import logging
import os
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ...config.algorithms.losses import POLICY_LOSSES
from ...config.algorithms.queries import uses_critic, uses_reference, uses_teacher
from ...config.schema import RunConfig
from ...utils.imports import lazy_module
from ..weights import lora, model_config

if TYPE_CHECKING:
    from omegaconf import DictConfig
    from verl.workers.engine_workers import ActorRolloutRefWorker

    from .critic import Critic

critics = lazy_module("trinity.runtime.trainer.critic")
functions = lazy_module("trinity.runtime.trainer.functions")

# torch's default collective timeout for gloo; the trainer's group never waits less (group_timeout)
TORCH_GROUP_TIMEOUT_S = 1800


@dataclass
class Workers:
    """What setup builds on a rank: verl's workers, each an ActorRolloutRefWorker in the role it names."""

    actor: "ActorRolloutRefWorker"  # the policy trained (its `actor` attribute is verl's actor inside the worker)
    verl_loss: partial  # verl's ppo_loss bound to its actor config, which trinity's own losses read their config from
    base: str  # the model the actor starts from (with LoRA, the adapter's base)
    ref: "ActorRolloutRefWorker | None" = None  # a reference model of its own (a LoRA actor's is its adapter off)
    teacher: "ActorRolloutRefWorker | None" = None  # the distillation teacher: forward passes only
    critic: "Critic | None" = None  # PPO's value model


def join_group(config: RunConfig, rank: int, world_size: int, host: str, port: int) -> None:
    """Join the trainer's process group (FSDP's collectives), unless this process already holds it (a rank kept from
    the previous stage): verl reads the rank and world from the environment torch's launchers set."""
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), MASTER_ADDR=host, MASTER_PORT=str(port))
    os.environ["LOCAL_RANK"] = "0"  # each rank a process of its own: Ray makes its one device visible to it
    if dist.is_initialized():
        return
    dist.init_process_group(
        config.trainer.process_group_backend,
        init_method=f"tcp://{host}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=group_timeout(config),
    )


def group_timeout(config: RunConfig) -> datetime.timedelta:
    """The trainer group's collective timeout: a rank waits in its next gather while rank 0 sends a sync, which may
    take synchronizer.sync_timeout; never below 30 minutes (torch's default for gloo; NCCL's own is 10 minutes, so on
    GPUs this raises it too)."""
    return datetime.timedelta(seconds=max(config.synchronizer.sync_timeout, TORCH_GROUP_TIMEOUT_S))


def build(config: RunConfig, model_path: str, total_steps: int, log: logging.Logger) -> Workers:
    """verl's workers for a stage that starts from `model_path` (a model folder or a checkpoint)."""
    from ..verl import engines
    from ..verl.workers import ActorRolloutRefWorker  # first: verl's own imports without vLLM

    engines.install(config, log)
    functions.prepare(config.algorithm)  # trinity's own functions registered with verl in this process
    from ..verl.config import build as verl_section

    start = lora.sources(model_path, config)
    with tempfile.TemporaryDirectory(prefix="trinity-verl-") as made:  # verl reads the adapter and configs as it builds
        scratch = Path(made)
        adapter = start.adapter or _initial_adapter(config, start.base, scratch / "adapter")
        hf_config = _configured(config, start.base, scratch / "actor")
        section = verl_section(config, start.base, total_steps, adapter, hf_config)
        log.info("verl actor config: %s", dict(section.actor))
        actor = _started(ActorRolloutRefWorker(section, role="actor"))
        workers = Workers(actor=actor, verl_loss=actor.loss_fn, base=start.base)  # the loss before SFT replaces it
        _add_beside(config, workers, section, total_steps, scratch)
    return workers


def _add_beside(config: RunConfig, workers: Workers, section: "DictConfig", total_steps: int, scratch: Path) -> None:
    """The models the algorithm asks for beside the actor (the reference, the distillation teacher, the critic, each
    built while `scratch` holds the configs verl reads), and SFT's loss."""
    from ..verl.workers import ActorRolloutRefWorker

    if uses_reference(config.algorithm) and lora.adapter_of(config) is None:  # a LoRA actor's reference: adapter off
        workers.ref = _started(ActorRolloutRefWorker(section, role="ref"))
    if uses_teacher(config.algorithm.advantage_fn):
        workers.teacher = _started(ActorRolloutRefWorker(_teacher_section(config, total_steps), role="ref"))
    if POLICY_LOSSES[config.algorithm.policy_loss_fn].batch == "sft":
        _train_on_samples(workers.actor)
    if uses_critic(config.algorithm.advantage_fn):
        critic = critics.start_model(config, workers.base)
        workers.critic = critics.Critic(config, critic, total_steps, _configured(config, critic, scratch / "critic"))


def _configured(config: RunConfig, model_path: str, folder: Path) -> str | None:
    """A folder of `model_path`'s config as the run changes it (model.rope_*), which verl reads as hf_config_path, so
    the trainer runs the config the engines run (weights/model_config.py); None where the run changes nothing."""
    changes = model_config.overrides(config, model_path)
    return model_config.config_folder(model_path, changes, folder) if changes else None


def _started(worker: "ActorRolloutRefWorker") -> "ActorRolloutRefWorker":
    """`worker` with its model built (verl's constructor only reads the config)."""
    worker.init_model()
    return worker


def _train_on_samples(actor: "ActorRolloutRefWorker") -> None:
    """SFT: verl's actor runs ppo_loss, which calls the entry's loss mode; SFT replaces that loss with verl's own."""
    from verl.workers.utils.losses import sft_loss

    actor.actor.set_loss_fn(partial(sft_loss, config=None))


def _teacher_section(config: RunConfig, total_steps: int) -> "DictConfig":
    """verl's section for the distillation teacher: the actor's, from model.teacher_model_path, without LoRA (the
    teacher is a whole model; only its log-probs are computed)."""
    from ..verl.config import build as verl_section

    plain = config.model.model_copy(update={"lora_configs": None})
    return verl_section(config.model_copy(update={"model": plain}), config.model.teacher_model_path, total_steps)


def _initial_adapter(config: RunConfig, base: str, folder: Path) -> str | None:
    """A fresh float32 adapter for verl to load (None without LoRA): lora.initial_adapter says why."""
    adapter = lora.adapter_of(config)
    if adapter is None:
        return None
    seed, remote = config.explorer.rollout_model.seed, config.model.trust_remote_code
    lora.initial_adapter(base, adapter, folder, seed, remote)
    return str(folder)
