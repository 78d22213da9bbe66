"""A train step on real trainer ranks: a bf16 LoRA update with a KL loss, the environment's tokens kept out of the
loss, and advantages computed over the whole batch when a task's rollouts sit on several ranks; Clip_B's entropy taken
in the old policy's forward pass only where the advantage reads it, and its mask over every rank's tokens multiplied
into the response mask; the rollout correction's weights and mask in verl's batch, taken over the whole batch."""

import math

import pytest

from tests.runtime.trainer.spawn import spawned, two_ranks


def lora_update(demo_dir: str, out) -> None:
    """In a process of its own: a bf16 LoRA trainer rank with a KL loss takes one update on a batch of its own."""
    import os

    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.experience import Experience
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer.rank import TrainerRank

    overrides = (
        "+model.lora_configs=[{lora_rank: 8}]",
        "trainer.param_dtype=bfloat16",
        "algorithm.kl_loss_fn=low_var_kl",
    )
    config = resolve(Request(None, ("hardware=cpu", *overrides, "buffer.train_batch_size=8"))).stage("grpo")
    os.environ.update(get_platform("cpu").verl_env())
    rank = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
    rank.setup("127.0.0.1", free_port(), f"{demo_dir}/model", 2, None)
    actor = rank.workers.actor
    module = actor.actor.engine.module
    dtypes = lambda train: sorted({str(p.dtype) for p in module.parameters() if p.requires_grad == train})  # noqa: E731
    before = {n: t.clone() for n, t in rank.engine_weights().items()}  # on one CPU rank they alias the weights
    exps = [Experience([3, 4, 5], [6, 7], [-1.0, -1.0], reward=float(i % 2), group=f"g{i // 4}") for i in range(8)]
    rank.steps.whole = exps  # rank 0's step batch, as taken from the buffer
    batch, _, _ = rank.steps.tensors(exps)
    actor.update_actor(batch)
    after = rank.engine_weights()
    state = actor.actor.engine.optimizer.state.values()
    out.put(
        {
            "trained": dtypes(True),
            "frozen": dtypes(False),
            "b_was_zero": all(not t.any() for n, t in before.items() if ".lora_B." in n),
            "b_moved": all(after[n].any() for n in after if ".lora_B." in n),
            "moments": sum(s["exp_avg"].numel() for s in state),
            "adapter": sum(t.numel() for t in after.values()),
        }
    )


@pytest.mark.train  # a real verl trainer rank, in a process of its own
def test_a_bf16_lora_trainer_keeps_an_fp32_adapter_and_updates_it_with_a_kl_loss(demo_assets):
    """The base frozen in the training dtype, the adapter in fp32 (Adam's steps would round away in bf16); the KL's
    reference pass (adapter off) comes after a pass with it on, or FSDP2 would take bf16 for the adapter's
    gradients; only the adapter has optimizer state."""
    seen = spawned(lora_update, str(demo_assets))
    assert (seen["trained"], seen["frozen"]) == (["torch.float32"], ["torch.bfloat16"])
    assert (seen["b_was_zero"], seen["b_moved"]) == (True, True), seen
    assert seen["moments"] == seen["adapter"]


GROUPS = [(1.0, "a"), (0.0, "a"), (1.0, "b"), (0.0, "b"), (0.0, "b"), (1.0, "b"), (0.5, "c"), (1.0, "c")]
PENALTIES = [[0.1], [0.0], [0.2], [0.0], [0.05], [0.0], [0.0], [0.3]]


def grpo_rank(
    demo_dir: str, *overrides: str, batch: int, resume: str | None = None, stage: str = "grpo", model: str | None = None
):
    """In a process of its own: the demo's GRPO trainer rank (one, on the CPU; its `stage` where given, on `model`
    where given) with `overrides`, set up to take updates of `batch` experiences (from checkpoint folder `resume`'s
    trainer state where given)."""
    import os

    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer.rank import TrainerRank

    request = Request(None, ("hardware=cpu", *overrides, f"buffer.train_batch_size={batch}"))
    config = resolve(request).stage(stage)
    os.environ.update(get_platform("cpu").verl_env())
    rank = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
    rank.setup("127.0.0.1", free_port(), model or f"{demo_dir}/model", 4, None, resume=resume)
    return rank


def masked_losses(demo_dir: str, out) -> None:
    """In a process of its own: one update's loss on episodes whose environment turns come after the model's (masked),
    on the same episodes without those turns, and on them with the turns trained; lr 1e-20 leaves the weights."""
    from trinity.runtime.experience import Experience
    from trinity.runtime.trainer.batch import metric_mean

    rank = grpo_rank(demo_dir, "algorithm.optimizer.lr=1e-20", "algorithm.bypass_old_logprobs=true", batch=4)
    from verl.utils import tensordict_utils as tu  # after the platform's env: verl reads it at import

    def loss(response, mask):
        exps = [
            Experience([3, 4, 5], response, [-2.0] * len(response), float(i % 2), "g", action_mask=mask)
            for i in range(4)
        ]
        rank.steps.whole = exps  # rank 0's step batch, as taken from the buffer
        batch, _, _ = rank.steps.tensors(exps)
        return metric_mean(tu.get(rank.workers.actor.update_actor(batch), "metrics").get("loss"))

    out.put(
        {
            "masked": loss([6, 7, 1, 9, 8], [1, 1, 0, 0, 0]),
            "without": loss([6, 7], None),
            "trained": loss([6, 7, 1, 9, 8], None),
        }
    )


@pytest.mark.train  # a real verl trainer rank, in a process of its own
def test_the_environments_tokens_add_nothing_to_the_loss(demo_assets):
    """A causal model's log-probs of the model's tokens do not depend on what comes after them: masked, the turns
    after change nothing; trained, they do."""
    seen = spawned(masked_losses, str(demo_assets))
    assert seen["masked"] == pytest.approx(seen["without"], rel=1e-5), seen
    assert abs(seen["trained"] - seen["masked"]) > 1e-3, seen


def old_policy_update(demo_dir: str, in_update: bool, out) -> None:
    """In a process of its own: two updates of a trainer rank that recomputes the old policy (bypass_old_logprobs
    false), taking it from the update's forward pass (`in_update`) or from a forward pass before; each update's loss,
    grad_norm and logprob_diff, and the weights after."""
    from trinity.runtime.experience import Experience
    from trinity.runtime.trainer.batch import counts

    rank = grpo_rank(demo_dir, "algorithm.bypass_old_logprobs=false", "algorithm.optimizer.lr=1e-3", batch=8)
    assert rank.steps.old_in_update  # what the run would do
    rank.steps.old_in_update = in_update
    forwards = []
    compute = rank.workers.actor.compute_log_prob
    rank.workers.actor.compute_log_prob = lambda *a, **k: forwards.append(1) or compute(*a, **k)
    seen = []
    for step in (1, 2):
        exps = [
            Experience([3, 4, 5], [6 + i % 3, 7, 8], [-1.5, -2.0, -2.5], float(i % 2), f"g{i // 4}") for i in range(8)
        ]
        rank.steps.whole = exps  # rank 0's step batch, as taken from the buffer
        rank.steps.bind_loss(step, counts(exps))
        batch, extra, _ = rank.steps.tensors(exps)
        seen.append(rank.steps._metrics(rank.workers.actor.update_actor(batch), len(exps), 0.0) | extra)
    weights = rank.engine_weights()
    out.put(
        {
            "steps": seen,
            "forwards": len(forwards),
            "weights": sum(float(t.double().abs().sum()) for t in weights.values()),
        }
    )


@pytest.mark.train  # two real verl trainer ranks, each in a process of its own
def test_the_old_policy_from_the_updates_own_forward_pass_trains_as_the_one_computed_before(demo_assets):
    """One mini-batch of one epoch: the update's forward pass runs at the old policy's weights, so its log-probs are
    the old policy's: the same losses, gradient norms, logprob_diff and weights after two updates, with no forward
    pass before the update."""
    taken = spawned(old_policy_update, str(demo_assets), True)
    before = spawned(old_policy_update, str(demo_assets), False)
    assert (taken["forwards"], before["forwards"]) == (0, 2)
    for ours, theirs in zip(taken["steps"], before["steps"], strict=True):
        for key in ("loss", "grad_norm", "logprob_diff"):
            assert ours[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-7), (key, ours, theirs)
    assert all(0.0 < s["logprob_diff"] < 5.0 and s["grad_norm"] > 0 for s in taken["steps"]), taken
    assert taken["weights"] == pytest.approx(before["weights"], rel=1e-6)


def shard_advantages(rank: int, port: int, out) -> None:
    """In a process of its own: trainer rank `rank` of 2 (gloo) computes its shard's advantages from its own KL rows;
    rank 0 holds the step's whole batch, as after taking it from the buffer."""
    import torch.distributed as dist

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.experience import Experience
    from trinity.runtime.trainer.step import Step

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    overrides = ("+stages.1.algorithm.algorithm_type=rloo", "+stages.1.algorithm.kl_penalty_fn=k2")
    config = resolve(Request(None, ("hardware=cpu", *overrides, "+stages.1.algorithm.kl_penalty_fn_args.kl_coef=2")))
    config = config.stage("grpo")
    step = Step(config, rank, 2, workers=None, sampler=None)  # the advantages need no model
    if rank == 0:
        step.whole = [Experience([1], [2], [-1.0], reward, group) for reward, group in GROUPS]
    kl = [[p / 2 for p in row] for row in PENALTIES[rank * 4 : rank * 4 + 4]]  # kl_coef 2 makes them the penalties
    out.put((rank, step.advantages(kl, {"values": None})))
    dist.destroy_process_group()


@pytest.mark.train  # two trainer processes in a gloo group
def test_advantages_are_computed_over_the_whole_batch_when_a_task_spans_ranks():
    """Task 'b' has rollouts on both ranks: rank 0 gathers every rank's KL rows, takes kl_coef x KL off the rewards,
    computes the group advantages once, and hands each rank its shard, which equals the single-process computation;
    the KL metric is the whole batch's."""
    from types import SimpleNamespace

    from trinity.runtime.experience import Experience
    from trinity.runtime.trainer import functions

    got = two_ranks(shard_advantages)
    exps = [Experience([1], [2], [-1.0], reward, group) for reward, group in GROUPS]
    whole, _ = functions.advantages_and_returns(
        exps, SimpleNamespace(advantage_fn="rloo", advantage_fn_args={}), PENALTIES
    )
    assert got[0][0] + got[1][0] == whole
    # by hand, task b: rewards less penalties [0.8, 0, -0.05, 1] -> each minus the mean of the other three
    assert [a[0] for a in whole[2:6]] == pytest.approx([0.8 - 0.95 / 3, -1.75 / 3, -0.05 - 1.8 / 3, 1 - 0.75 / 3])
    assert got[0][2] == {"kl_penalty": pytest.approx(sum(p[0] for p in PENALTIES) / 2 / 8)} and got[1][2] == {}


# A step's rollouts in the order the buffer hands them: four short, then four long (prompt, response lengths)
SORTED_ROLLOUTS = [(3, 1), (3, 2), (3, 1), (3, 2), (3, 40), (3, 37), (3, 40), (3, 39)]


class OneBatch:
    """Rank 0's sampler for one step: the batch as read from the buffer, nothing dropped."""

    def __init__(self, exps):
        self.exps = exps

    def batch(self, step):
        return list(self.exps), {}


def deal(rank: int, port: int, balance: bool, out) -> None:
    """In a process of its own: trainer rank `rank` of 2 (gloo) takes its shard of a step's batch, which rank 0
    reads from the buffer and deals (Step.shard, as a train step does); it reports the shard's tokens and rows, rank 0
    also the step's global_seqlen metrics."""
    import torch.distributed as dist

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.experience import Experience
    from trinity.runtime.trainer.batch import tokens
    from trinity.runtime.trainer.step import Step

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    config = resolve(Request(None, ("hardware=cpu", f"+stages.1.trainer.balance_batch={balance}"))).stage("grpo")
    exps = [Experience([5] * p, [6] * r, [-1.0] * r, 0.0, f"t{i // 4}") for i, (p, r) in enumerate(SORTED_ROLLOUTS)]
    step = Step(config, rank, 2, workers=None, sampler=OneBatch(exps) if rank == 0 else None)
    mine, counts = step.shard(1)
    out.put((rank, (sum(tokens(e) for e in mine), [len(e.response_ids) for e in mine], step.sampled, counts)))
    dist.destroy_process_group()


@pytest.mark.train  # two trainer processes in a gloo group
@pytest.mark.parametrize("balance", [True, False])
def test_two_trainer_ranks_get_about_the_same_tokens_with_balance_batch(balance):
    """trainer.balance_batch: rank 0 reorders the step's batch before scattering it, so that each rank trains on
    about as many tokens (with rollouts that come back short first, in order one rank gets 4 short and the other 4
    long); each rank keeps 4 rows and every rollout is trained once; rank 0 reports the metrics verl's trainer logs."""

    got = two_ranks(deal, balance)
    (tokens0, rows0, sampled, counts), (tokens1, rows1, _, _) = got[0], got[1]
    assert len(rows0) == len(rows1) == 4
    assert sorted(rows0 + rows1) == sorted(r for _, r in SORTED_ROLLOUTS)  # every rollout once, on one rank
    assert counts["rollout_tokens"] == sum(r for _, r in SORTED_ROLLOUTS)  # the whole batch's, on every rank
    if not balance:  # the buffer's order: contiguous halves
        assert (tokens0, tokens1) == (18, 168) and sampled == {}
        return
    assert (tokens0, tokens1) == (94, 92)  # verl's Karmarkar-Karp deal; 93 and 93 exist, within a row's reach
    assert sampled["seqlen_metrics"] == {
        "global_seqlen/min": 18,
        "global_seqlen/max": 168,
        "global_seqlen/minmax_diff": 150,
        "global_seqlen/balanced_min": 92,
        "global_seqlen/balanced_max": 94,
        "global_seqlen/mean": 93.0,
    }


# --- Clip_B: the entropy from the old-policy pass, the mask into the response mask ---------------------------------


class ForwardPasses:
    """The step's LogProbs without a model: each forward pass recorded; the actor's log-probs -0.5 and entropy 1 on
    every token."""

    def __init__(self):
        self.calls = []

    def actor(self, tensors):
        self.calls.append("actor")
        return tensors["response_mask"].float() * 0 - 0.5

    def actor_and_entropy(self, tensors):
        self.calls.append("actor_and_entropy")
        return tensors["response_mask"].float() * 0 - 0.5, tensors["response_mask"].float() * 0 + 1.0


def clipb_step(*overrides: str, rank: int = 0, world_size: int = 1):
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.trainer.step import Step

    config = resolve(Request(None, ("hardware=cpu", *(f"+stages.1.{o}" for o in overrides)))).stage("grpo")
    step = Step(config, rank, world_size, workers=None, sampler=None)
    step.logprobs = ForwardPasses()
    return step


def padded_tensors(rows: int = 2):
    import torch

    mask = torch.ones(rows, 2, dtype=torch.long)
    return {"response_mask": mask, "old_log_probs": torch.full((rows, 2), -1.0), "responses": mask.clone()}


@pytest.mark.parametrize(
    "overrides, calls, entropy",
    [
        ((), [], False),  # grpo under bypass_old_logprobs: no forward pass at all
        # recomputed, but nothing reads it before the update: the update's own forward pass gives it (old_policy.py)
        (("algorithm.bypass_old_logprobs=false",), [], False),
        # a KL penalty in the reward reads it before: the old policy's pass, no entropy
        (("algorithm.bypass_old_logprobs=false", "algorithm.kl_penalty_fn=k2"), ["actor"], False),
        (("algorithm.advantage_fn=clipb",), ["actor_and_entropy"], True),  # a pass for the entropy alone
        # the recomputation's own pass gives the entropy too: still one forward pass
        (("algorithm.advantage_fn=clipb", "algorithm.bypass_old_logprobs=false"), ["actor_and_entropy"], True),
    ],
)
def test_the_entropy_is_computed_only_for_an_advantage_that_reads_it_in_the_old_policys_pass(overrides, calls, entropy):
    step = clipb_step(*overrides)
    tensors = padded_tensors()
    extra, found = step._old_policy(tensors)
    assert step.logprobs.calls == calls and (found is not None) == entropy
    recomputed = calls != [] and "algorithm.bypass_old_logprobs=false" in overrides
    assert extra == ({"logprob_diff": 0.5} if recomputed else {})
    assert tensors["old_log_probs"].tolist() == [[-0.5 if recomputed else -1.0] * 2] * 2
    if entropy:
        assert found.tolist() == [[1.0, 1.0]] * 2


def test_clipbs_mask_multiplies_the_response_mask_and_reports_its_metrics():
    """The rollout's log-probs (not the recomputed ones) and the entropy make the signal; the dropped token leaves the
    response mask, which verl's update takes as its loss mask and token count."""
    import torch

    from trinity.runtime.experience import Experience

    step = clipb_step("algorithm.advantage_fn=clipb", "algorithm.advantage_fn_args.mu=0.5")
    exps = [Experience([1], [2, 3], [0.0, 0.0], 1.0, "a"), Experience([1], [2, 3], [0.0, 0.0], 0.0, "a")]
    tensors = padded_tensors()
    tensors["advantages"] = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])
    rollout = torch.zeros(2, 2)  # p = 1: the signal is the entropy, [1, 1 | 1, 5] (as test_clipb's first case)
    metrics = step._token_mask(exps, tensors, rollout, torch.tensor([[1.0, 1.0], [1.0, 5.0]]))
    assert tensors["response_mask"].tolist() == [[1, 1], [0, 1]] and tensors["response_mask"].dtype == torch.long
    assert metrics == {
        "advantage_metrics": pytest.approx(
            {
                "clipb_frac_clipped": 0.25,
                "clipb_frac_clipped_pos": 0.0,
                "clipb_frac_clipped_neg": 0.5,
                "clipb_ES": 2.0,
                "clipb_varS": 3.0,
            }
        )
    }
    grpo = clipb_step()  # an advantage without a token mask leaves the response mask as it is
    assert grpo._token_mask(exps, tensors, rollout, None) == {} and tensors["response_mask"].tolist() == [
        [1, 1],
        [0, 1],
    ]


def shard_token_mask(rank: int, port: int, out) -> None:
    """In a process of its own: trainer rank `rank` of 2 (gloo) takes Clip_B's mask of its shard, its rows half the
    batch; rank 0 takes it over both ranks' rows."""
    import torch
    import torch.distributed as dist

    from trinity.runtime.experience import Experience

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    step = clipb_step("algorithm.advantage_fn=clipb", "algorithm.advantage_fn_args.mu=0.5", rank=rank, world_size=2)
    exps = [Experience([1], [2], [0.0], 0.0, "a")]
    tensors = padded_tensors(1) | {"responses": torch.ones(1, 1, dtype=torch.long)}
    tensors["response_mask"] = torch.ones(1, 1, dtype=torch.long)
    tensors["advantages"] = torch.tensor([[-1.0]])
    entropy = torch.tensor([[0.0 if rank == 0 else 4.0]])  # alone, each rank's signal is flat
    metrics = step._token_mask(exps, tensors, torch.zeros(1, 1), entropy)
    out.put((rank, (tensors["response_mask"].tolist(), metrics)))
    dist.destroy_process_group()


@pytest.mark.train  # two trainer processes in a gloo group
def test_clipbs_mask_is_taken_over_every_ranks_tokens():
    """Signal [0 | 4] across the ranks: mean 2, std 2; rank 0's token, 1 std below, goes at mu 0.5 (each rank alone
    would keep its token: one value has no spread)."""

    got = two_ranks(shard_token_mask)
    assert (got[0][0], got[1][0]) == ([[0]], [[1]])
    assert got[0][1]["advantage_metrics"]["clipb_frac_clipped"] == 0.5 and got[1][1] == {}


def _flat(rows: list[list[float]]) -> list[float]:
    return [value for row in rows for value in row]


# each experience's log-ratio, recomputed old policy against the engine's, per response token (2 tokens each)
DELTAS = [[0.1, 0.1], [math.log(3.0), 0.0]] + [[0.0, 0.0]] * 6
# the demo's GRPO stage (its SFT stage has no rollouts to correct)
CORRECTION = tuple(
    f"+stages.1.algorithm.{key}"
    for key in (
        "bypass_old_logprobs=false",
        "rollout_correction.rollout_is=sequence",
        "rollout_correction.rollout_is_threshold=1.5",
        "rollout_correction.rollout_is_batch_normalize=true",
        "rollout_correction.rollout_rs=token_k1",
        "rollout_correction.rollout_rs_threshold=2.0",
    )
)


def corrected_update(demo_dir: str, out) -> None:
    """In a process of its own: a trainer rank builds verl's batch with sequence IS weights and token_k1 rejection from
    experiences whose engine log-probs are its own recomputed ones less DELTAS, and takes an update on it."""
    import os

    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.experience import Experience
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer import batch as batches
    from trinity.runtime.trainer.batch import metric_mean
    from trinity.runtime.trainer.rank import TrainerRank

    config = resolve(Request(None, ("hardware=cpu", "buffer.train_batch_size=8", *CORRECTION))).stage("grpo")
    os.environ.update(get_platform("cpu").verl_env())
    rank = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
    rank.setup("127.0.0.1", free_port(), f"{demo_dir}/model", 8, None)
    from verl.utils import tensordict_utils as tu  # after the platform's env: verl reads it at import

    exps = [Experience([3, 4, 5], [6, 7], [0.0, 0.0], float(i % 2), f"g{i // 4}") for i in range(8)]
    own = rank.steps.logprobs.actor(batches.padded(exps, rank.steps._pad_id())).tolist()
    for exp, mine, delta in zip(exps, own, DELTAS):
        exp.logprobs = [m - d for m, d in zip(mine, delta)]
    rank.steps.whole = exps  # rank 0's step batch, as taken from the buffer
    batch, extra, _ = rank.steps.tensors(exps)
    output = rank.workers.actor.update_actor(batch)
    out.put(
        {
            "weights": batch["rollout_is_weights"].tolist(),
            "mask": batch["response_mask"].tolist(),
            "metrics": extra["rollout_corr"],
            "logprob_diff": extra["logprob_diff"],
            "loss": metric_mean(tu.get(output, "metrics").get("loss")),
        }
    )


@pytest.mark.train  # a real verl trainer rank, in a process of its own
def test_rollout_correction_weighs_and_masks_the_batch_verls_loss_trains_on(demo_assets):
    """Sequence weights exp(sum of the log-ratios), truncated at 1.5 and divided by their batch mean; token_k1 with
    2.0 rejects the one token whose ratio is 3; the update trains on it."""
    seen = spawned(corrected_update, str(demo_assets))
    raw = [math.exp(0.2), 1.5] + [1.0] * 6  # row 1: exp(log 3) = 3, truncated at 1.5
    mean = sum(raw) / 8
    assert _flat(seen["weights"]) == pytest.approx([w / mean for w in raw for _ in range(2)], rel=1e-4)
    assert seen["mask"] == [[1, 1], [0, 1]] + [[1, 1]] * 6
    metrics = seen["metrics"]
    assert metrics["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(1 / 16)
    assert metrics["rollout_corr/rollout_is_batch_norm_factor"] == pytest.approx(mean, rel=1e-4)
    assert metrics["rollout_corr/kl"] == pytest.approx(-(0.2 + math.log(3)) / 16, rel=1e-3)
    assert seen["logprob_diff"] == pytest.approx((0.2 + math.log(3)) / 16, rel=1e-3)
    assert math.isfinite(seen["loss"])


def shard_correction(rank: int, port: int, out) -> None:
    """In a process of its own: trainer rank `rank` of 2 (gloo) corrects its shard of 4 rows; rank 0 computes the
    correction over both ranks' rows (no model: the log-probs are given)."""
    import torch
    import torch.distributed as dist

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.trainer.step import Step

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    overrides = (*CORRECTION[:2], CORRECTION[3])  # sequence weights at the default threshold, normalised
    config = resolve(Request(None, ("hardware=cpu", *overrides))).stage("grpo")
    step = Step(config, rank, 2, workers=None, sampler=None)
    deltas = DELTAS[rank * 4 : rank * 4 + 4]
    width = 2 + rank  # each rank pads to its own longest response
    old = torch.tensor([d + [5.0] * (width - 2) for d in deltas])
    mask = torch.tensor([[1, 1] + [0] * (width - 2)] * 4)
    tensors = {"old_log_probs": old, "response_mask": mask}
    kept, metrics = step._rollout_correction(tensors, torch.zeros_like(old))
    out.put((rank, (kept, tensors["rollout_is_weights"].tolist(), metrics)))
    dist.destroy_process_group()


@pytest.mark.train  # two trainer processes in a gloo group
def test_rollout_correction_is_taken_over_the_whole_batch_across_ranks():
    """The batch mean that normalises the weights is over both ranks' rows (the single-process answer), and each rank
    gets its own rows back at its own width; rank 0 alone reports the metrics."""

    seen = two_ranks(shard_correction)
    raw = [math.exp(0.2), 2.0] + [1.0] * 6  # row 1's 3 truncated at the default threshold, 2.0
    mean = sum(raw) / 8
    assert _flat(seen[0][1]) == pytest.approx(_flat([[w / mean] * 2 for w in raw[:4]]), rel=1e-5)
    assert _flat(seen[1][1]) == pytest.approx(_flat([[w / mean] * 2 + [0.0] for w in raw[4:]]), rel=1e-5)
    assert seen[0][0] and seen[1][0]
    assert seen[0][2]["rollout_corr"]["rollout_corr/rollout_is_batch_norm_factor"] == pytest.approx(mean, rel=1e-5)
    assert seen[1][2] == {}
