"""Each train step on a trainer rank: its batch, the advantages, verl's update.

Rank 0 assembles the step's batch (sampling.Sampler), reorders it so that each rank gets about the same tokens
(trainer.balance_batch: batch.balanced), and scatters equal, contiguous shards. The advantages are
computed on rank 0 over the whole batch, with the estimator the algorithm's entry names (a group estimator compares
the rollouts of a task, which may sit on several ranks), from every rank's per-token columns, and scattered back.
Then every rank runs verl's update on its shard.
"""

import time
from typing import TYPE_CHECKING, Any

from ...config.algorithms.losses import POLICY_LOSSES
from ...config.algorithms.queries import masks_tokens, uses_entropy
from ...config.schema import RunConfig
from ...utils.imports import import_path, lazy_module
from . import old_policy
from .logprobs import LogProbs

if TYPE_CHECKING:
    import torch
    from tensordict import TensorDict

    from ..experience import Experience
    from .sampling import Sampler
    from .worker_setup import Workers

# Ray imports the rank's module wherever a handle to it is taken: what holds torch loads on first use
batches = lazy_module("trinity.runtime.trainer.batch")
functions = lazy_module("trinity.runtime.trainer.functions")

Tensors = dict[str, "torch.Tensor"]  # a padded batch's columns by name (batch.padded)
CriticBatch = tuple[Tensors, "torch.Tensor", "torch.Tensor", int]  # what Critic.update takes
Built = tuple["TensorDict | None", dict, "CriticBatch | None"]  # verl's batch, metrics of building it, the critic's
# rank 0's answer to a step the experiences ran out before, where that ends the run (modes.trains_until_drained)
DRAINED = "drained"
NOTHING_TRAINED = {"loss": None, "grad_norm": None, "lr": None, "experiences": 0, "seconds": 0.0}


class Step:
    """Runs each train step of a stage on this rank; rank 0's `sampler` takes the batches from the buffer."""

    def __init__(
        self, config: RunConfig, rank: int, world_size: int, workers: "Workers", sampler: "Sampler | None"
    ) -> None:
        self.config, self.rank, self.world_size, self.workers = config, rank, world_size, workers
        self.sampler = sampler  # rank 0: assembles each step's batch
        self.whole: list[Experience] = []  # rank 0: the step's whole batch
        self.sampled: dict = {}  # rank 0: what sampling dropped or added this step
        self.logprobs = LogProbs(config, workers, temperature(config))
        self.old_in_update = old_policy.taken_in_update(config)  # no forward pass of its own before the update

    def train(self, step: int) -> dict | None:
        """One update on `train_batch_size` experiences (the critic's first, with one); rank 0 returns loss,
        grad_norm, lr and the update's seconds. Before step trainer.critic_warmup only the critic is updated."""
        exps, info = self.shard(step)
        if exps == DRAINED:
            return None if self.rank else {DRAINED: info}
        started = time.perf_counter()
        if not exps:  # sampling dropped every group: nothing to train on this step
            return None if self.rank else NOTHING_TRAINED | self.sampled
        self.bind_loss(step, info)
        batch, extra, critic_batch = self.tensors(exps)
        if critic_batch is not None:  # the critic first, as upstream's trainer
            extra |= self.workers.critic.update(*critic_batch)
        warming = self.workers.critic is not None and step < self.config.trainer.critic_warmup  # upstream's check
        output = None if warming or batch is None else self.workers.actor.update_actor(batch)
        if self.rank != 0:
            return None
        return self._metrics(output, len(exps), started) | self.sampled | extra | self._preview(step)

    def bind_loss(self, step: int, info: dict) -> None:
        """The actor's loss for train step `step`: trinity's own where the algorithm has one (bound anew each step: it
        may read the step and the whole batch's counts `info`), else verl's; taking the old policy from its own
        forward pass where the step computes it nowhere else (old_policy.py)."""
        own = functions.actor_loss(self.config.algorithm, self.workers.verl_loss.keywords["config"], step, info)
        if self.old_in_update:
            self.workers.actor.actor.set_loss_fn(old_policy.in_update(own or self.workers.verl_loss))
        elif own is not None:
            self.workers.actor.actor.set_loss_fn(own)

    def shard(self, step: int) -> tuple[list["Experience"], dict]:
        """This rank's experiences and the batch's global counts (batches.counts): rank 0 assembles the batch
        (sampling), reorders it so that each rank gets about the same tokens (trainer.balance_batch) and scatters
        equal, contiguous shards."""
        shards = None
        if self.rank == 0:
            from .sampling import Drained  # here: sampling imports torch, which taking a rank's handle must not

            try:
                self.whole, self.sampled = self.sampler.batch(step)
            except Drained as end:  # every rank hears of it, and none steps
                return self._scatter([(DRAINED, str(end))] * self.world_size)
            if balances(self.config):  # trainer.balance_batch: each rank about the same work
                self.whole, seqlen = batches.balanced(self.whole, self.world_size)
                self.sampled = self.sampled | ({"seqlen_metrics": seqlen} if seqlen else {})
            parts = batches.shards(self.whole, self.world_size)
            counts = batches.counts([e for part in parts for e in part])
            shards = [(part, counts) for part in parts]
        return self._scatter(shards)

    def advantages(self, kl: list | None, columns: dict[str, list | None]) -> tuple[list, list, dict]:
        """This rank's per-token advantages and returns, and (rank 0) the batch's mean penalised KL: rank 0 computes
        them over the whole batch (group estimators compare the rollouts of a task, which may sit on several ranks)
        from the rewards less every rank's KL penalties (kl_coef x `kl`), and every rank's rows of the per-token
        `columns` the estimator reads (functions.COLUMNS)."""
        gathered = self._gather({"kl": kl, **columns})
        shards, metrics = None, {}
        if self.rank == 0:
            whole = {
                name: None if gathered[0][name] is None else [row for part in gathered for row in part[name]]
                for name in gathered[0]
            }
            advantages, returns, metrics = functions.batch_advantages(self.whole, self.config.algorithm, whole)
            shards = list(zip(batches.shards(advantages, self.world_size), batches.shards(returns, self.world_size)))
        return (*self._scatter(shards), metrics)

    def tensors(self, exps: list["Experience"]) -> Built:
        """verl's batch for this rank's experiences, metrics of building it, and (with a critic) what its update
        takes."""
        meta = self._meta(len(exps) * self.world_size)
        kind = batch_kind(self.config)
        if kind == "sft":
            return self._sft_batch(exps, meta)
        tensors = batches.padded(exps, self._pad_id())
        tensors["old_log_probs"] = batches.old_logprobs(exps, tensors["responses"].shape[1])
        reference = self.logprobs.reference(tensors)
        if reference is not None:
            tensors["ref_log_prob"] = reference
        if kind == "mix":  # which rows are SFT samples, for the mixing loss
            tensors["expert_mask"] = batches.expert_mask(exps, tensors["response_mask"])
        if kind == "pairs":  # DPO: no rollout policy; its loss reads the reference where RL reads the old policy
            tensors["old_log_probs"], tensors["advantages"] = reference, reference.new_zeros(reference.shape)
            return self._actor_batch(tensors, meta), {}, None
        return self._rl_batch(exps, tensors, meta)

    def _rl_batch(self, exps: list["Experience"], tensors: Tensors, meta: dict) -> Built:
        """The rest of an RL batch: the old policy, the rollout correction, the critic's values, the advantages over
        the whole batch and the tokens they take out of the loss (Clip_B's). Neither verl's batch nor the critic's
        where the correction rejected every token of it (their losses would divide by zero tokens)."""
        engine = tensors["old_log_probs"]  # the engine's, before the trainer may recompute them
        extra, entropy = self._old_policy(tensors)
        kept = True
        if self.config.algorithm.rollout_correction is not None and not self.config.algorithm.bypass_old_logprobs:
            kept, corrected = self._rollout_correction(tensors, engine)
            extra |= corrected
        values = self.workers.critic.values(tensors) if self.workers.critic is not None else None
        columns = self._columns(tensors, exps, values)
        advantages, returns, metrics = self.advantages(self._kl(tensors, exps), columns)
        width = tensors["responses"].shape[1]
        tensors["advantages"] = batches.per_token(advantages, width)
        metrics |= self._token_mask(exps, tensors, engine, entropy)
        metrics |= self._batch_mask(exps, tensors)
        total = meta["global_batch_size"]
        if values is None or not kept:
            return (self._actor_batch(tensors, meta) if kept else None), extra | metrics, None
        return (
            self._actor_batch(tensors, meta),
            extra | metrics,
            (tensors, values, batches.per_token(returns, width), total),
        )

    def _old_policy(self, tensors: Tensors) -> tuple[dict, "torch.Tensor | None"]:
        """Unless algorithm.bypass_old_logprobs or the update's forward pass gives them (old_policy.py), the old
        policy's log-probs recomputed by the trainer (its numerics, not the engine's) in place of the engine's, and how
        far apart they were; and where the advantage function reads it (Clip_B), the actor's per-token entropy from
        that same forward pass (under bypass_old_logprobs, a forward pass of its own: the same weights), else None."""
        algorithm = self.config.algorithm
        wants_entropy = uses_entropy(algorithm.advantage_fn)
        if self.old_in_update:  # the update's forward pass gives them, and logprob_diff (old_policy.py)
            return {}, None
        if algorithm.bypass_old_logprobs:
            return {}, self.logprobs.actor_and_entropy(tensors)[1] if wants_entropy else None
        entropy = None
        if wants_entropy:
            recomputed, entropy = self.logprobs.actor_and_entropy(tensors)
        else:
            recomputed = self.logprobs.actor(tensors)
        diff = batches.masked_mean((recomputed - tensors["old_log_probs"]).abs(), tensors["response_mask"])
        tensors["old_log_probs"] = recomputed
        return {"logprob_diff": diff}, entropy

    def _token_mask(
        self, exps: list["Experience"], tensors: Tensors, rollout: "torch.Tensor", entropy: "torch.Tensor | None"
    ) -> dict:
        """The tokens the advantage function takes out of the loss (ADVANTAGES' token_mask: Clip_B's), over the
        whole batch, from the advantages, the rollout's own log-probs and the actor's per-token `entropy`: rank 0
        takes the mask over every rank's rows, each rank multiplies its shard into the response mask (so the tokens
        leave the loss and its token count, as upstream's). Rank 0 returns its metrics, named after the function
        (TrainResult's advantage_metrics)."""
        name = self.config.algorithm.advantage_fn
        if not masks_tokens(name):
            return {}
        mine = {
            "advantages": functions.rows(tensors["advantages"], exps),
            "log_probs": functions.rows(rollout, exps),
            "entropy": None if entropy is None else functions.rows(entropy, exps),
            "masks": functions.rows(tensors["response_mask"], exps),
        }
        gathered = self._gather(mine)
        shards, metrics = None, {}
        if self.rank == 0:
            whole = {key: [row for part in gathered for row in part[key]] for key in mine}
            mask = functions.token_mask(name)
            keep, found = mask(**whole, **(self.config.algorithm.advantage_fn_args or {}))
            shards = batches.shards(keep, self.world_size)
            metrics = {"advantage_metrics": {f"{name}_{k}": v for k, v in found.items()}}
        keep = batches.per_token(self._scatter(shards), tensors["responses"].shape[1])
        tensors["response_mask"] = tensors["response_mask"] * keep.to(tensors["response_mask"].dtype)
        return metrics

    def _rollout_correction(self, tensors: Tensors, engine: "torch.Tensor") -> tuple[bool, dict]:
        """algorithm.rollout_correction over the whole batch (rollout_correction.py): rank 0 computes it from every
        rank's rows of the recomputed old log-probs and the `engine`'s, each rank takes its rows' IS weights (verl's
        rollout_is_weights, which its policy loss multiplies in) and leaves the rejected tokens out of its response
        mask. Whether any token of the batch is kept, and (rank 0) the rollout_corr/* metrics."""
        from . import rollout_correction

        mask = tensors["response_mask"]
        mine = {name: matrix.tolist() for name, matrix in (("old", tensors["old_log_probs"]), ("rollout", engine))}
        mine["mask"] = mask.tolist()
        gathered = self._gather(mine)
        shards, metrics = None, {}
        if self.rank == 0:
            width = max(len(part["mask"][0]) for part in gathered)
            whole = {key: batches.per_token([row for part in gathered for row in part[key]], width) for key in mine}
            cfg = self.config.algorithm.rollout_correction
            found = rollout_correction.correct(whole["old"], whole["rollout"], whole["mask"], cfg)
            kept = bool((found.keep * whole["mask"]).any())
            rows = len(whole["mask"])
            weights = found.weights.tolist() if found.weights is not None else [None] * rows
            parts = zip(batches.shards(weights, self.world_size), batches.shards(found.keep.tolist(), self.world_size))
            shards = [(None if found.weights is None else w, k, kept) for w, k in parts]
            metrics = {"rollout_corr": found.metrics}
        weights, keep, kept = self._scatter(shards)
        width = mask.shape[1]
        tensors["response_mask"] = (mask * batches.per_token(keep, width)[:, :width]).to(mask.dtype)
        if weights is not None:
            tensors["rollout_is_weights"] = batches.per_token(weights, width)[:, :width]
        return kept, metrics

    def _batch_mask(self, exps: list["Experience"], tensors: Tensors) -> dict:
        """A loss's token mask over the whole batch (POLICY_LOSSES' batch_mask: M2PO's), from the current policy's
        log-ratio to the rollout's log-probs and the advantages: rank 0 takes it over every rank's rows, each rank
        zeroes its masked tokens' advantages. Rank 0 returns its metrics, named after the loss (TrainResult's
        loss_metrics)."""
        name = self.config.algorithm.policy_loss_fn
        entry = POLICY_LOSSES[name]
        if entry.batch_mask is None:
            return {}
        current = self.logprobs.actor(tensors)  # the policy the update starts from: one mini-batch, one epoch
        mine = {
            "log_ratio": functions.rows(current - tensors["old_log_probs"], exps),
            "advantages": functions.rows(tensors["advantages"], exps),
            "mask": functions.rows(tensors["response_mask"], exps),
        }
        gathered = self._gather(mine)
        shards, metrics = None, {}
        if self.rank == 0:
            whole = {key: [row for part in gathered for row in part[key]] for key in mine}
            fn = import_path(f"{entry.module}:{entry.batch_mask}", f"policy loss {name!r}'s batch mask")
            keep, found = fn(whole["log_ratio"], whole["advantages"], whole["mask"], **self._loss_args())
            shards = batches.shards(keep, self.world_size)
            metrics = {"loss_metrics": {f"{name}_{k}": v for k, v in found.items()}}
        keep = self._scatter(shards)
        tensors["advantages"] = tensors["advantages"] * batches.per_token(keep, tensors["responses"].shape[1])
        return metrics

    def _loss_args(self) -> dict:
        return {k: v for k, v in (self.config.algorithm.policy_loss_fn_args or {}).items() if k != "loss_agg_mode"}

    def _columns(
        self, tensors: Tensors, exps: list["Experience"], values: "torch.Tensor | None"
    ) -> dict[str, list | None]:
        """This rank's rows of the per-token columns the estimator reads beside the rewards."""
        columns = {"values": None if values is None else functions.rows(values, exps)}
        if self.workers.teacher is not None:  # distillation: the student's log-probs against the teacher's
            teacher = self.logprobs.teacher(tensors)
            columns |= {
                "old_log_probs": functions.rows(tensors["old_log_probs"], exps),
                "teacher_log_probs": functions.rows(teacher, exps),
            }
        return columns

    def _kl(self, tensors: Tensors, exps: list["Experience"]) -> list | None:
        """Each response's per-token KL(old policy, reference) as algorithm.kl_penalty_fn estimates it, for the
        penalty in its reward (None without one)."""
        kind = self.config.algorithm.kl_penalty_fn
        if kind in (None, "none"):
            return None
        return functions.rows(batches.kl(tensors["old_log_probs"], tensors["ref_log_prob"], kind), exps)

    def _sft_batch(self, exps: list["Experience"], meta: dict) -> Built:
        """verl's SFT batch: every response, or those the advantage function selects (RAFT; rank 0 chooses over the
        whole batch). None when none is chosen anywhere: verl's loss would divide by zero tokens."""
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu

        weights, extra = None, {}
        if functions.estimator(self.config.algorithm.advantage_fn) is not None:
            weights, _, extra = self.advantages(None, {})
            extra["selected"] = self._sum_over_ranks(sum(1 for row in weights if any(row)))
            if not extra["selected"]:
                return None, extra, None
        td = TensorDict(batches.sft_batch(exps, weights), batch_size=[len(exps)])
        tu.assign_non_tensor(td, **meta)
        return td, extra, None

    def _actor_batch(self, tensors: Tensors, meta: dict) -> "TensorDict":
        """verl's unpadded batch of the padded `tensors`, with the update's settings."""
        from tensordict import TensorDict
        from verl.utils import tensordict_utils as tu

        from ..verl import response_logits
        from ..verl.unpadding import unpadded

        td = unpadded(TensorDict(tensors, batch_size=[tensors["input_ids"].shape[0]]))
        entropy = self.workers.actor.config.actor.entropy_coeff != 0
        # every RL loss reads the responses' log-probs alone (an SFT batch's loss mask may cover any token)
        tu.assign_non_tensor(td, calculate_entropy=entropy, **{response_logits.RESPONSES_ONLY: True}, **meta)
        return td

    def _meta(self, total: int) -> dict:
        """The update's settings verl reads off the batch: the whole step is one mini-batch of one epoch, in order
        (each step trains on its batch once, as Trinity-RFT's trainer does)."""
        return dict(
            global_batch_size=total,
            mini_batch_size=total,
            epochs=1,
            seed=self.config.explorer.rollout_model.seed,
            dataloader_kwargs={"shuffle": False},
            compute_loss=True,
            temperature=self.logprobs.temperature,
        )

    def _preview(self, step: int) -> dict:
        """Rank 0: the step's representative rollouts, where trainer.enable_preview asks (preview.py)."""
        if not self.config.trainer.enable_preview:
            return {}
        from .preview import representative

        tokenizer = self.workers.actor.actor.model_config.tokenizer
        rollouts = batch_kind(self.config) in ("rl", "mix")  # SFT and DPO batches have no reward
        return {"preview": representative(self.whole, tokenizer, step, rollouts)}

    def _pad_id(self) -> int:
        tokenizer = self.workers.actor.actor.model_config.tokenizer
        return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def _metrics(self, output: "TensorDict | None", count: int, started: float) -> dict:
        """Rank 0's report of the update (nothing trained: a critic warming up, or no SFT sample selected)."""
        from verl.utils import tensordict_utils as tu

        metrics = tu.get(output, "metrics") if output is not None else {}
        diff = {old_policy.DIFF: batches.metric_mean(metrics[old_policy.DIFF])} if old_policy.DIFF in metrics else {}
        return diff | {
            "loss": batches.metric_mean(metrics.get("loss")),
            "grad_norm": batches.metric_mean(metrics.get("grad_norm")),
            "lr": _last(metrics.get("lr")),
            "experiences": count * self.world_size,
            "seconds": time.perf_counter() - started,
        }

    # --- the step's collectives: rank 0 holds the whole batch ------------------------------------------------

    def _gather(self, mine: dict) -> list[dict] | None:
        """Every rank's `mine` on rank 0, in rank order (None on the others)."""
        if self.world_size == 1:
            return [mine]
        import torch.distributed as dist

        gathered = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(mine, gathered, dst=0)
        return gathered

    def _scatter(self, shards: list | None) -> Any:
        """This rank's item of `shards`, one per rank, which rank 0 holds (None on the others)."""
        if self.world_size == 1:
            return shards[0]
        import torch.distributed as dist

        mine = [None]
        dist.scatter_object_list(mine, shards if self.rank == 0 else None, src=0)
        return mine[0]

    def _sum_over_ranks(self, count: int) -> int:
        if self.world_size == 1:
            return count
        import torch
        import torch.distributed as dist

        total = torch.tensor([count])
        dist.all_reduce(total)
        return int(total.item())


def batch_kind(config: RunConfig) -> str:
    """What verl's actor trains on: rl (advantages and the old policy), sft (packed samples), pairs (DPO), or
    mix (rl with SFT samples among its rows)."""
    return POLICY_LOSSES[config.algorithm.policy_loss_fn].batch


def balances(config: RunConfig) -> bool:
    """Whether rank 0 deals each step's batch balanced (trainer.balance_batch): never a DPO batch, whose chosen and
    rejected rows go together (Trinity-RFT's DPO has can_balance_batch false)."""
    return config.trainer.balance_batch and batch_kind(config) != "pairs"


def temperature(config: RunConfig) -> float:
    """The temperature the trainer's log-probs are taken at: the one the engines sampled the rollouts at (the first
    taskset's), so that they are of the same distribution; 1 for batches without rollouts (SFT, DPO)."""
    inputs = config.buffer.explorer_input
    tasksets = inputs.training
    return tasksets[0].rollout_args.temperature if tasksets and batch_kind(config) in ("rl", "mix") else 1.0


def _last(values: Any) -> float | None:
    """The last of a metric verl reports per micro-batch (the learning rate after the step)."""
    values = values if isinstance(values, list) else [values]
    return float(values[-1]) if values and values[-1] is not None else None
