"""One trainer rank: verl's ActorRolloutRefWorker (FSDP2) in a process group we initialise.

Rank 0 takes each batch from the buffer, computes advantages over the whole batch (with the
estimator the algorithm's entry names: a group estimator compares the rollouts of each task), and scatters
equal shards; every rank then runs verl's update. Saving and weight sync gather full tensors on
every rank (an FSDP collective); rank 0 writes or sends them.
"""

import datetime
import os
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from ...config import sync_methods
from ...config.algorithms.losses import POLICY_LOSSES
from ...config.algorithms.queries import uses_critic, uses_reference, uses_teacher
from ...config.schema import RunConfig
from ...utils.imports import lazy_module
from .. import lora
from ..roles import Role
from ..run_dir import STATE

# Ray imports this module wherever a rank's handle is taken (the synchronizer): what holds torch loads on first use
batches = lazy_module("trinity.runtime.trainer.batch")
critics = lazy_module("trinity.runtime.trainer.critic")
functions = lazy_module("trinity.runtime.trainer.functions")
sampling = lazy_module("trinity.runtime.trainer.sampling")

# the checkpoint writes its own
WEIGHT_FILES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".h5",
    ".msgpack",
    ".gguf",
    ".ckpt",
    ".index.json",
)


class TrainerRank(Role):
    """A verl actor worker on one device; the constructor is light, `setup` builds the model."""

    WARM = ("trinity.runtime.verl.workers",)

    def __init__(self, *, config: RunConfig, rank: int, world_size: int, **identity: Any) -> None:
        super().__init__(**identity)
        self.config, self.rank, self.world_size = config, rank, world_size
        self.worker = self.ref = self.teacher = self.critic = self.buffer = self.sync_group = None
        self.whole: list = []  # rank 0: the step's whole batch
        self.sampler: sampling.Sampler | None = None  # rank 0: assembles each step's batch
        self.sampled: dict = {}  # rank 0: what sampling dropped or added this step
        self.companions: dict[str, bytes] = {}
        self.lora, self.base = lora.adapter_of(config), ""
        self._forwarded = False  # whether the actor has run a forward pass with its adapter on
        self._pieces: Iterator | None = None  # a memory sync's gathered weights, taken a piece at a time
        self._exported: Any = None  # device_ipc: the piece's device buffer, kept until the engines have loaded it

    def release(self) -> None:
        """Leave this stage's weight-sync group (torch would keep it and its communicator registered) and drop what a
        memory sync left."""
        from ..sync import group

        group.leave(self.sync_group)
        self.sync_group, self._pieces, self._exported = None, None, None

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
        self, host: str, port: int, model_path: str, total_steps: int, buffer: Any, resume: str | None = None
    ) -> dict:
        """Join the trainer group, build verl's worker(s), load `resume` (a checkpoint's trainer state)."""
        import torch.distributed as dist

        os.environ.update(
            RANK=str(self.rank),
            WORLD_SIZE=str(self.world_size),
            MASTER_ADDR=host,
            MASTER_PORT=str(port),
            LOCAL_RANK="0",
        )
        started = time.perf_counter()
        if not dist.is_initialized():
            dist.init_process_group(
                self.config.trainer.process_group_backend,
                init_method=f"tcp://{host}:{port}",
                rank=self.rank,
                world_size=self.world_size,
                timeout=group_timeout(self.config),
            )
        from ..verl.workers import ActorRolloutRefWorker  # first: verl's own imports without vLLM

        functions.prepare(self.config.algorithm)  # trinity's own functions registered with verl in this process

        from ..verl.config import build

        start = lora.sources(model_path, self.config)
        with tempfile.TemporaryDirectory(prefix="trinity-adapter-") as fresh:
            adapter = start.adapter or self._initial_adapter(start.base, Path(fresh))
            section = build(self.config, start.base, total_steps, adapter)
            self.log.info("verl actor config: %s", dict(section.actor))
            self.worker = ActorRolloutRefWorker(section, role="actor")
            self.worker.init_model()
        if uses_reference(self.config.algorithm) and self.lora is None:  # a LoRA actor's reference: adapter off
            self.ref = ActorRolloutRefWorker(section, role="ref")
            self.ref.init_model()
        if uses_teacher(self.config.algorithm.advantage_fn):
            self.teacher = ActorRolloutRefWorker(self._teacher_section(build, total_steps), role="ref")
            self.teacher.init_model()
        self.verl_loss = self.worker.loss_fn  # verl's ppo_loss bound to its actor config, which own losses read
        if (
            self._batch_kind() == "sft"
        ):  # verl's actor runs ppo_loss, which calls the entry's loss mode; SFT replaces it
            from verl.workers.utils.losses import sft_loss

            self.worker.actor.set_loss_fn(partial(sft_loss, config=None))
        if uses_critic(self.config.algorithm.advantage_fn):
            self.critic = critics.Critic(self.config, critics.start_model(self.config, start.base), total_steps)
        if resume:
            self.worker.load_checkpoint(str(Path(resume) / "trainer_state"))
            if self.critic is not None:
                self.critic.load(resume)
        self.buffer, self.companions, self.base = buffer, companion_files(Path(start.base)), start.base
        if self.rank == 0:
            self.sampler = sampling.Sampler(self.config, buffer, self._expert_data(start.base))
        return {"rank": self.rank, "seconds": time.perf_counter() - started}

    def _expert_data(self, tokenizer: str) -> Any:
        """The SFT data set sample strategy mix puts in each batch (None without one)."""
        args = self.config.algorithm.sample_strategy_args or {}
        if not sampling.SAMPLE_STRATEGIES[self.config.algorithm.sample_strategy].mixes:
            return None
        from ..buffer.actor import data_set

        storage = self.config.buffer.trainer_input.auxiliary_buffers[args["sft_dataset_name"]]
        seed = self.config.explorer.rollout_model.seed
        return data_set(storage, {"tokenizer": tokenizer, "seed": seed, "model": self.config.model, "data": "sft"})

    def _teacher_section(self, build: Any, total_steps: int) -> Any:
        """verl's section for the distillation teacher: the actor's, from model.teacher_model_path, without LoRA (the
        teacher is a whole model; only its log-probs are computed)."""
        plain = self.config.model.model_copy(update={"lora_configs": None})
        return build(self.config.model_copy(update={"model": plain}), self.config.model.teacher_model_path, total_steps)

    def _initial_adapter(self, base: str, folder: Path) -> str | None:
        """A fresh float32 adapter for verl to load (None without LoRA): lora.initial_adapter says why."""
        if self.lora is None:
            return None
        seed, remote = self.config.explorer.rollout_model.seed, self.config.model.trust_remote_code
        lora.initial_adapter(base, self.lora, folder, seed, remote)
        return str(folder)

    def train_step(self, step: int) -> dict | None:
        """One update on `train_batch_size` experiences (the critic's first, with one); rank 0 returns loss,
        grad_norm, lr and the update's seconds. Before step trainer.critic_warmup only the critic is updated."""
        exps, info = self._my_shard(step)
        started = time.perf_counter()
        if not exps:  # sampling dropped every group: nothing to train on this step
            return (
                None
                if self.rank
                else {"loss": None, "grad_norm": None, "lr": None, "experiences": 0, "seconds": 0.0} | self.sampled
            )
        own = functions.actor_loss(self.config.algorithm, self.verl_loss.keywords["config"], step, info)
        if own is not None:
            self.worker.actor.set_loss_fn(own)
        batch, extra, critic_batch = self._tensors(exps)
        if critic_batch is not None:  # the critic first, as upstream's trainer
            extra |= self.critic.update(*critic_batch)
        warming = self.critic is not None and step < self.config.trainer.critic_warmup  # upstream's check
        output = None if warming or batch is None else self.worker.update_actor(batch)
        if self.rank != 0:
            return None
        from verl.utils import tensordict_utils as tu

        metrics = tu.get(output, "metrics") if output is not None else {}
        return (
            {
                "loss": batches.metric_mean(metrics.get("loss")),
                "grad_norm": batches.metric_mean(metrics.get("grad_norm")),
                "lr": _last(metrics.get("lr")),
                "experiences": len(exps) * self.world_size,
                "seconds": time.perf_counter() - started,
            }
            | self.sampled
            | extra
        )

    def _my_shard(self, step: int) -> tuple[list, dict]:
        """This rank's experiences and the batch's global counts (batches.counts): rank 0 assembles the batch
        (sampling) and scatters equal, contiguous shards."""
        import torch.distributed as dist

        shards = [None] * self.world_size
        if self.rank == 0:
            self.whole, self.sampled = self.sampler.batch(step)
            parts = batches.shards(self.whole, self.world_size)
            counts = batches.counts([e for part in parts for e in part])
            shards = [(part, counts) for part in parts]
        if self.world_size == 1:
            return shards[0]
        mine = [None]
        dist.scatter_object_list(mine, shards if self.rank == 0 else None, src=0)
        return mine[0]

    def _advantages(self, kl: list | None, columns: dict[str, list | None]) -> tuple[list, list, dict]:
        """This rank's per-token advantages and returns, and (rank 0) the batch's mean penalised KL: rank 0 computes
        them over the whole batch (group estimators compare the rollouts of a task, which may sit on several ranks)
        from the rewards less every rank's KL penalties (kl_coef x `kl`), and every rank's rows of the per-token
        `columns` the estimator reads (functions.COLUMNS)."""
        import torch.distributed as dist

        mine = {"kl": kl, **columns}
        gathered = [mine]
        if self.world_size > 1:
            gathered = [None] * self.world_size if self.rank == 0 else None
            dist.gather_object(mine, gathered, dst=0)
        shards, metrics = [None] * self.world_size, {}
        if self.rank == 0:
            whole = {
                name: None if gathered[0][name] is None else [row for part in gathered for row in part[name]]
                for name in mine
            }
            advantages, returns, metrics = functions.batch_advantages(self.whole, self.config.algorithm, whole)
            shards = list(zip(batches.shards(advantages, self.world_size), batches.shards(returns, self.world_size)))
        if self.world_size == 1:
            return (*shards[0], metrics)
        mine = [None]
        dist.scatter_object_list(mine, shards if self.rank == 0 else None, src=0)
        return (*mine[0], metrics)

    def _batch_kind(self) -> str:
        """What verl's actor trains on: rl (advantages and the old policy), sft (packed samples), pairs (DPO), or
        mix (rl with SFT samples among its rows)."""
        return POLICY_LOSSES[self.config.algorithm.policy_loss_fn].batch

    def _tensors(self, exps: list) -> tuple[Any, dict, tuple | None]:
        """verl's batch for this rank's experiences, metrics of building it, and (with a critic) what its update
        takes."""
        total = len(exps) * self.world_size
        meta = dict(
            global_batch_size=total,
            mini_batch_size=total,
            epochs=1,
            seed=self.config.explorer.rollout_model.seed,
            dataloader_kwargs={"shuffle": False},
            compute_loss=True,
            temperature=self._temperature(),
        )
        kind = self._batch_kind()
        if kind == "sft":
            return self._sft_batch(exps, meta)
        tensors = batches.padded(exps, self._pad_id())
        width = tensors["responses"].shape[1]
        tensors["old_log_probs"] = batches.old_logprobs(exps, width)
        reference = self._reference_logprobs(tensors)
        if reference is not None:
            tensors["ref_log_prob"] = reference
        self._forwarded = True
        if kind == "mix":  # which rows are SFT samples, for the mixing loss
            tensors["expert_mask"] = batches.expert_mask(exps, tensors["response_mask"])
        if kind == "pairs":  # DPO: no rollout policy; its loss reads the reference where RL reads the old policy
            tensors["old_log_probs"], tensors["advantages"] = reference, reference.new_zeros(reference.shape)
            return self._actor_batch(tensors, meta), {}, None
        extra = {}
        if not self.config.algorithm.bypass_old_logprobs:  # the old policy is the trainer's numerics, not the engine's
            recomputed = self._logprobs(self.worker.compute_log_prob, tensors)
            extra["logprob_diff"] = batches.masked_mean(
                (recomputed - tensors["old_log_probs"]).abs(), tensors["response_mask"]
            )
            tensors["old_log_probs"] = recomputed
        values = self.critic.values(tensors) if self.critic is not None else None
        columns = {"values": None if values is None else functions.rows(values, exps)}
        if self.teacher is not None:  # distillation: the student's log-probs against the teacher's
            teacher = self._logprobs(self.teacher.compute_ref_log_prob, tensors)
            columns |= {
                "old_log_probs": functions.rows(tensors["old_log_probs"], exps),
                "teacher_log_probs": functions.rows(teacher, exps),
            }
        advantages, returns, metrics = self._advantages(self._kl(tensors, exps), columns)
        tensors["advantages"] = batches.per_token(advantages, width)
        critic_batch = None if values is None else (tensors, values, batches.per_token(returns, width), total)
        return self._actor_batch(tensors, meta), extra | metrics, critic_batch

    def _sft_batch(self, exps: list, meta: dict) -> tuple[Any, dict, None]:
        """verl's SFT batch: every response, or those the advantage function selects (RAFT; rank 0 chooses over the
        whole batch). None when none is chosen anywhere: verl's loss would divide by zero tokens."""
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu

        weights, extra = None, {}
        if functions.estimator(self.config.algorithm.advantage_fn) is not None:
            weights, _, extra = self._advantages(None, {})
            extra["selected"] = self._sum_over_ranks(sum(1 for row in weights if any(row)))
            if not extra["selected"]:
                return None, extra, None
        td = TensorDict(batches.sft_batch(exps, weights), batch_size=[len(exps)])
        tu.assign_non_tensor(td, **meta)
        return td, extra, None

    def _sum_over_ranks(self, count: int) -> int:
        import torch
        import torch.distributed as dist

        if self.world_size == 1:
            return count
        total = torch.tensor([count])
        dist.all_reduce(total)
        return int(total.item())

    def _actor_batch(self, tensors: dict, meta: dict) -> Any:
        """verl's unpadded batch of the padded `tensors`, with the update's settings."""
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu
        from verl.workers.utils.padding import left_right_2_no_padding

        td = left_right_2_no_padding(TensorDict(tensors, batch_size=[tensors["input_ids"].shape[0]]))
        tu.assign_non_tensor(td, calculate_entropy=self.worker.config.actor.entropy_coeff != 0, **meta)
        return td

    def _reference_logprobs(self, tensors: dict) -> Any:
        """The reference model's log-probs of the batch (None where the algorithm needs none)."""
        if self.ref is not None:
            return self._logprobs(self.ref.compute_ref_log_prob, tensors)
        if self.lora is None or not uses_reference(self.config.algorithm):
            return None
        if not self._forwarded:  # LoRA: the base model is the adapter switched off
            # FSDP2 sets each group's dtypes at its first forward from the parameters that train then: with the
            # adapter off there are none, and a bf16 base would make the fp32 adapter's gradients bf16
            self._logprobs(self.worker.compute_log_prob, tensors)
        return self._logprobs(self.worker.compute_log_prob, tensors, no_lora_adapter=True)

    def _kl(self, tensors: dict, exps: list) -> list | None:
        """Each response's per-token KL(old policy, reference) as algorithm.kl_penalty_fn estimates it, for the
        penalty in its reward (None without one)."""
        kind = self.config.algorithm.kl_penalty_fn
        if kind in (None, "none"):
            return None
        return functions.rows(batches.kl(tensors["old_log_probs"], tensors["ref_log_prob"], kind), exps)

    def _logprobs(self, infer: Any, tensors: dict, **flags: bool) -> Any:
        """Log-probs of the batch's responses under `infer` (the reference model's, or the actor's own; `flags` are
        verl's, such as no_lora_adapter)."""
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu
        from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

        keys = ("prompts", "responses", "input_ids", "attention_mask", "position_ids", "response_mask")
        td = left_right_2_no_padding(
            TensorDict({k: tensors[k].clone() for k in keys}, batch_size=[tensors["input_ids"].shape[0]])
        )
        tu.assign_non_tensor(td, calculate_entropy=False, compute_loss=False, temperature=self._temperature(), **flags)
        out = infer(td)
        return no_padding_2_padding(tu.get(out, "log_probs"), td).float()

    def _temperature(self) -> float:
        tasksets = [
            t for t in [self.config.buffer.explorer_input.taskset, *self.config.buffer.explorer_input.tasksets] if t
        ]
        return tasksets[0].rollout_args.temperature if tasksets and self._batch_kind() in ("rl", "mix") else 1.0

    def _pad_id(self) -> int:
        tokenizer = self.worker.actor.model_config.tokenizer
        return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    # --- weights out: checkpoints and sync ------------------------------------------------------------

    def full_weights(self) -> dict | None:
        """Every weight of the model the engines run, as a full CPU tensor on rank 0 (None elsewhere; all ranks must
        call it): with LoRA, what the engines take (the adapter, or base + adapter merged)."""
        return self._on_rank0(self._gathered())

    def engine_weights(self) -> dict | None:
        """`full_weights` as the engines take them (a checkpoint sync's file, published weights): in the rollout dtype
        where that is narrower."""
        return self._on_rank0(self._gathered(self._rollout_dtype()))

    def _on_rank0(self, pairs: Iterator[tuple[str, Any]]) -> dict | None:
        if self.rank != 0:
            for _ in pairs:  # every rank takes part in each gather; only rank 0 keeps a copy
                pass
            return None
        return {name: tensor.to("cpu") for name, tensor in pairs}

    def _gathered(self, narrow: Any = None, kind: str | None = None) -> Iterator[tuple[str, Any]]:
        """Each full weight in turn (an FSDP gather on every rank); rank 0's cast to `narrow` where that dtype is
        narrower, the other ranks' as gathered (they only take part). With LoRA, `kind` (adapter or merged) says
        which tensors; by default the ones the engines take."""
        if self.lora is None:
            params, _ = self.worker.actor.engine.get_per_tensor_param()
        else:
            params = self._lora_tensors(kind or ("adapter" if lora.moves_adapter(self.config) else "merged"))
        for name, tensor in params:
            if self.rank == 0:
                tensor = tensor.detach()
                dtype = _sent_dtype(tensor.dtype, narrow)
                tensor = (tensor if dtype == tensor.dtype else tensor.to(dtype)).contiguous()
            yield name, tensor

    def _lora_tensors(self, kind: str) -> Iterator[tuple[str, Any]]:
        """The adapter's matrices (PEFT's names), or the plain model with the adapter merged (Hugging Face names).

        Each shard is gathered on its own, on the device (where verl offloads parameters, from the host): a sync of
        the adapter never brings the base onto the device."""
        from torch.distributed.tensor import DTensor
        from verl.utils.device import get_device_id
        from verl.utils.model import convert_weight_keys

        module, device = self.worker.actor.engine.module, get_device_id()
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

    def _rollout_dtype(self) -> Any:
        """The dtype the engines keep what a sync moves in: the rollout dtype, or an adapter's lora_dtype."""
        import torch

        wanted = self.config.explorer.rollout_model.dtype
        if lora.moves_adapter(self.config) and self.lora.lora_dtype != "auto":
            wanted = self.lora.lora_dtype
        return getattr(torch, wanted)

    def save(self, folder: str, step: int, hf: bool) -> None:
        """verl's trainer state (model, optimizer, schedule) per rank; on rank 0 also Hugging Face files: the model,
        or with LoRA the adapter (PEFT's layout) and, if trainer.save_merged_model, the merged model in merged/."""
        self.worker.save_checkpoint(str(Path(folder) / "trainer_state"), global_step=step)
        if self.critic is not None:
            self.critic.save(folder, step)
        if not hf:
            return
        if self.lora is None:
            weights = self.full_weights()
            if self.rank == 0:
                self._write_hf(Path(folder), weights)
            return
        adapter = self._on_rank0(self._gathered(kind="adapter"))
        merged = self._on_rank0(self._gathered(kind="merged")) if self.config.trainer.save_merged_model else None
        if self.rank == 0:
            self._write_companions(Path(folder))
            lora.write_adapter(Path(folder), adapter, lora.peft_config(self.lora, self.base))
            if merged is not None:
                self._write_hf(Path(folder) / lora.MERGED, merged)

    def _write_hf(self, folder: Path, weights: dict) -> None:
        from ..weights import save_safetensors

        folder.mkdir(parents=True, exist_ok=True)
        self._write_companions(folder)
        save_safetensors(weights, folder / "model.safetensors")

    def _write_companions(self, folder: Path) -> None:
        for name, content in self.companions.items():
            (folder / name).write_bytes(content)

    def write_weights(self, path: str, version: int) -> None:
        """Rank 0 writes the engines' weights to `path` (atomically), then its marker naming their version."""
        from ...utils.atomic import replace_atomically
        from ..sync import files
        from ..weights import save_safetensors

        weights = self.engine_weights()
        if self.rank == 0:
            target = Path(path)
            replace_atomically(target, lambda tmp: save_safetensors(weights, tmp))
            files.mark(target, version)

    def weight_specs(self) -> list:
        """Name, shape and dtype of each weight, in the order and dtype `broadcast_weights` sends them."""
        from ..rollout.base import WeightSpec

        return [
            WeightSpec(name, tuple(t.shape), str(t.dtype).removeprefix("torch."))
            for name, t in self._gathered(self._rollout_dtype())
        ]

    def join_sync_group(self, backend: str, host: str, port: int, world_size: int, timeout_s: float) -> None:
        """Rank 0 hosts the weight-sync group and is its sender."""
        from ..sync import group

        self.sync_group = group.join(backend, host, port, 0, world_size, timeout_s)

    def weight_piece(self, index: int, count: int) -> Any:
        """Piece `index` of a memory sync, its next `count` weights in the rollout dtype (every rank gathers them).
        object_store: rank 0 returns them as one flat host tensor (into Ray's object store), the others None.
        device_ipc: every rank returns {device key: handle} of a flat buffer on its device, kept until the next piece
        or `end_weight_pieces`: the engine workers on that device map it."""
        from ..sync import pieces

        if index == 0:
            self._pieces = (tensor for _, tensor in self._gathered(self._rollout_dtype()))
        piece = [next(self._pieces) for _ in range(count)]
        if self.config.synchronizer.sync_channel == sync_methods.DEVICE_IPC:
            return self._export(piece)
        return pieces.flatten(piece, "cpu") if self.rank == 0 else None

    def _export(self, piece: list) -> dict:
        """The piece as one buffer on this rank's device in the rollout dtype (only rank 0's weights come cast from
        the gather), kept, and its handle under the device's key."""
        import ray
        import torch

        from ..sync import device_ipc, pieces

        self._exported = None  # the previous piece's buffer, which every engine has loaded, goes first
        dtype = _sent_dtype(piece[0].dtype, self._rollout_dtype())
        self._exported = pieces.flatten(piece, torch.accelerator.current_accelerator(), dtype)
        node, index = ray.get_runtime_context().get_node_id(), torch.accelerator.current_device_index()
        return device_ipc.export(self._exported, device_ipc.device_key(node, self.visible_devices_env, index))

    def end_weight_pieces(self) -> None:
        """A memory sync is done: drop its last buffer, let the device free what the engines mapped, and hand the
        gathered weights' cached blocks back before the engines generate beside them."""
        from ...utils.device import empty_cache
        from ..sync import device_ipc

        self._pieces, exported, self._exported = None, self._exported, None
        if exported is not None:
            del exported
            device_ipc.release(self.config.hardware.device_type)
            empty_cache()

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

    def broadcast_weights(self) -> float:
        """Gather each weight and (rank 0) broadcast it to the engines in the rollout dtype, a piece at a time;
        returns seconds spent."""
        from ..sync import group

        started = time.perf_counter()
        tensors = (tensor for _, tensor in self._gathered(self._rollout_dtype()))
        if self.rank == 0:
            group.send(self.sync_group, tensors, self.config.synchronizer.bucket_bytes)
        else:
            for _ in tensors:  # every rank takes part in each gather
                pass
        return time.perf_counter() - started


def group_timeout(config: RunConfig) -> datetime.timedelta:
    """The trainer group's collective timeout: a rank waits in its next gather while rank 0 sends a sync, which may
    take synchronizer.sync_timeout; never below 30 minutes (torch's default for gloo; NCCL's own is 10 minutes, so on
    GPUs this raises it too)."""
    return datetime.timedelta(seconds=max(config.synchronizer.sync_timeout, TORCH_GROUP_TIMEOUT_S))


TORCH_GROUP_TIMEOUT_S = 1800


def _sent_dtype(dtype: Any, narrow: Any) -> Any:
    """The dtype a weight travels in: `narrow` where it is a narrower floating dtype, else its own."""
    return narrow if narrow is not None and dtype.is_floating_point and narrow.itemsize < dtype.itemsize else dtype


def companion_files(model_path: Path) -> dict[str, bytes]:
    """The model folder's config, tokenizer and code, read once: a later stage's source checkpoint may be pruned."""
    skipped = lambda name: name.endswith(WEIGHT_FILES) or name.startswith(".") or name == STATE  # noqa: E731
    return {p.name: p.read_bytes() for p in sorted(model_path.iterdir()) if p.is_file() and not skipped(p.name)}


def _last(values: Any) -> float | None:
    values = values if isinstance(values, list) else [values]
    return float(values[-1]) if values and values[-1] is not None else None
