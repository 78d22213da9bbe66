"""What a checkpoint carries besides its weights: the model folder's own files, read once at setup."""

import pytest

from trinity.runtime.records.run_dir import STATE
from trinity.runtime.trainer.rank import companion_files


def test_a_checkpoint_carries_the_models_files_but_not_its_weights_or_state(tmp_path):
    files = ["config.json", "tokenizer.json", "chat_template.jinja", "modeling_tiny.py", "tokenizer.model"]
    skipped = ["model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "optimizer.pt", ".lock", STATE]
    for name in files + skipped:
        (tmp_path / name).write_bytes(name.encode())
    (tmp_path / "trainer_state").mkdir()  # verl's optimizer state: a folder, never copied
    assert companion_files(tmp_path) == {name: name.encode() for name in sorted(files)}


def spawned(target, *args):
    """What `target(*args, out)` puts on its queue, run in a spawned process (a trainer rank of its own) that must
    exit cleanly."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, out))
    proc.start()
    seen = out.get(timeout=240)
    proc.join(60)
    assert proc.exitcode == 0
    return seen


def weights_as_sent(demo_dir: str, rollout_dtype: str, out) -> None:
    """In a process of its own (it initialises torch.distributed): one real trainer rank on the demo model."""
    import os

    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer.rank import TrainerRank

    config = resolve(Request(None, ("hardware=cpu", f"explorer.rollout_model.dtype={rollout_dtype}"))).stage("grpo")
    os.environ.update(get_platform("cpu").verl_env())
    rank = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
    rank.setup("127.0.0.1", free_port(), f"{demo_dir}/model", 1, None)
    dtypes = lambda weights: sorted({str(t.dtype) for t in weights.values()})  # noqa: E731
    specs, engine = rank.weight_specs(), rank.engine_weights()
    out.put(
        {
            "specs": sorted({s.dtype for s in specs}),
            "engine": dtypes(engine),
            "full": dtypes(rank.full_weights()),
            **memory_sync_pieces(rank, specs, engine),
        }
    )


def memory_sync_pieces(rank, specs: list, engine: dict) -> dict:
    """A memory sync's pieces as the synchronizer takes them from rank 0 (the object store's), 256 KiB at most each
    (a larger tensor alone): split back by the plan, they are the engines' weights, in order."""
    import torch

    from trinity.runtime.sync import pieces

    plan = pieces.plan(specs, 2**18)
    flats = [rank.weight_piece(index, len(piece)) for index, piece in enumerate(plan)]
    rank.end_weight_pieces()
    received = [t for flat, piece in zip(flats, plan) for t in pieces.split(flat, [s.shape for s in piece])]
    largest = max(t.numel() * t.element_size() for t in engine.values())
    return {
        "pieces": len(plan),
        "pieces_are_the_weights": all(torch.equal(a, b) for a, b in zip(received, engine.values()))
        and len(received) == len(engine),
        "bounded": all(f.numel() * f.element_size() <= max(2**18, largest) and f.device.type == "cpu" for f in flats),
    }


@pytest.mark.train  # a real verl trainer rank, in a process of its own
def test_weights_travel_to_the_engines_in_the_rollout_dtype_when_it_is_narrower(demo_assets):
    """A bf16 rollout gets bf16 weights from an fp32 trainer (half the bytes); checkpoints keep the trainer's fp32."""
    seen = {dtype: spawned(weights_as_sent, str(demo_assets), dtype) for dtype in ("bfloat16", "float32")}
    pieces = {"pieces_are_the_weights": True, "bounded": True}
    assert seen["bfloat16"] == {"specs": ["bfloat16"], "engine": ["torch.bfloat16"], "full": ["torch.float32"]} | {
        "pieces": seen["bfloat16"]["pieces"],
        **pieces,
    }
    assert seen["float32"] == {"specs": ["float32"], "engine": ["torch.float32"], "full": ["torch.float32"]} | {
        "pieces": seen["float32"]["pieces"],
        **pieces,
    }
    assert seen["float32"]["pieces"] > seen["bfloat16"]["pieces"] > 1  # fp32 is twice the bytes: more pieces


def test_the_trainers_group_waits_as_long_as_a_sync_may_take_and_never_below_torchs_default():
    """A rank waits in its next gather while rank 0 sends a sync: torch's 30-minute default would cut off a sync
    that synchronizer.sync_timeout allows."""
    from tests.conftest import REFERENCE
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.trainer.rank import group_timeout

    def timeout(seconds: int) -> float:
        config = resolve(Request(REFERENCE, ("hardware=a100", f"synchronizer.sync_timeout={seconds}"))).config
        return group_timeout(config).total_seconds()

    assert (timeout(7200), timeout(60)) == (7200, 1800)


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
    module = rank.worker.actor.engine.module
    dtypes = lambda train: sorted({str(p.dtype) for p in module.parameters() if p.requires_grad == train})  # noqa: E731
    before = {n: t.clone() for n, t in rank.engine_weights().items()}  # on one CPU rank they alias the weights
    exps = [Experience([3, 4, 5], [6, 7], [-1.0, -1.0], reward=float(i % 2), group=f"g{i // 4}") for i in range(8)]
    rank.whole = exps  # rank 0's step batch, as taken from the buffer
    batch, _, _ = rank._tensors(exps)
    rank.worker.update_actor(batch)
    after = rank.engine_weights()
    state = rank.worker.actor.engine.optimizer.state.values()
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


@pytest.mark.parametrize(
    "extra,dtype",
    [
        ((), "float32"),  # the cpu profile's rollout dtype
        (("model.lora_configs.0.lora_dtype=bfloat16",), "bfloat16"),  # what the engines keep the adapter in
        (("synchronizer.lora_sync=merged",), "float32"),  # merged weights: the rollout dtype
    ],
)
def test_a_sync_moves_the_adapter_in_the_dtype_the_engines_keep_it_in(demo_assets, monkeypatch, extra, dtype):
    import torch

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.trainer.rank import TrainerRank

    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    overrides = ("hardware=cpu", "~stages", "+model.lora_configs=[{lora_rank: 8}]", *extra)
    config = resolve(Request(None, overrides)).config
    rank = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
    assert rank._rollout_dtype() == getattr(torch, dtype)


GROUPS = [(1.0, "a"), (0.0, "a"), (1.0, "b"), (0.0, "b"), (0.0, "b"), (1.0, "b"), (0.5, "c"), (1.0, "c")]
PENALTIES = [[0.1], [0.0], [0.2], [0.0], [0.05], [0.0], [0.0], [0.3]]


def masked_losses(demo_dir: str, out) -> None:
    """In a process of its own: one update's loss on episodes whose environment turns come after the model's (masked),
    on the same episodes without those turns, and on them with the turns trained; lr 1e-20 leaves the weights."""
    import os

    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.experience import Experience
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer.batch import metric_mean
    from trinity.runtime.trainer.rank import TrainerRank

    overrides = ("algorithm.optimizer.lr=1e-20", "algorithm.bypass_old_logprobs=true", "buffer.train_batch_size=4")
    config = resolve(Request(None, ("hardware=cpu", *overrides))).stage("grpo")
    os.environ.update(get_platform("cpu").verl_env())
    rank = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
    rank.setup("127.0.0.1", free_port(), f"{demo_dir}/model", 4, None)
    from verl.utils import tensordict_utils as tu  # after the platform's env: verl reads it at import

    def loss(response, mask):
        exps = [
            Experience([3, 4, 5], response, [-2.0] * len(response), float(i % 2), "g", action_mask=mask)
            for i in range(4)
        ]
        rank.whole = exps  # rank 0's step batch, as taken from the buffer
        batch, _, _ = rank._tensors(exps)
        return metric_mean(tu.get(rank.worker.update_actor(batch), "metrics").get("loss"))

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


def shard_advantages(rank: int, port: int, out) -> None:
    """In a process of its own: trainer rank `rank` of 2 (gloo) computes its shard's advantages from its own KL rows;
    rank 0 holds the step's whole batch, as after taking it from the buffer."""
    import torch.distributed as dist

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.runtime.experience import Experience
    from trinity.runtime.trainer.rank import TrainerRank

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    overrides = ("+stages.1.algorithm.algorithm_type=rloo", "+stages.1.algorithm.kl_penalty_fn=k2")
    config = resolve(Request(None, ("hardware=cpu", *overrides, "+stages.1.algorithm.kl_penalty_fn_args.kl_coef=2")))
    config = config.stage("grpo")
    trainer = TrainerRank(name=f"trainer_node0.rank{rank}", role="trainer", config=config, rank=rank, world_size=2)
    if rank == 0:
        trainer.whole = [Experience([1], [2], [-1.0], reward, group) for reward, group in GROUPS]
    kl = [[p / 2 for p in row] for row in PENALTIES[rank * 4 : rank * 4 + 4]]  # kl_coef 2 makes them the penalties
    out.put((rank, trainer._advantages(kl, {"values": None})))
    dist.destroy_process_group()


@pytest.mark.train  # two trainer processes in a gloo group
def test_advantages_are_computed_over_the_whole_batch_when_a_task_spans_ranks():
    """Task 'b' has rollouts on both ranks: rank 0 gathers every rank's KL rows, takes kl_coef x KL off the rewards,
    computes the group advantages once, and hands each rank its shard, which equals the single-process computation;
    the KL metric is the whole batch's."""
    import multiprocessing
    from types import SimpleNamespace

    from trinity.runtime.experience import Experience
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer import functions

    ctx, port = multiprocessing.get_context("spawn"), free_port()
    out = ctx.Queue()
    procs = [ctx.Process(target=shard_advantages, args=(rank, port, out)) for rank in (0, 1)]
    for proc in procs:
        proc.start()
    got = dict(out.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    exps = [Experience([1], [2], [-1.0], reward, group) for reward, group in GROUPS]
    whole, _ = functions.advantages_and_returns(
        exps, SimpleNamespace(advantage_fn="rloo", advantage_fn_args={}), PENALTIES
    )
    assert got[0][0] + got[1][0] == whole
    # by hand, task b: rewards less penalties [0.8, 0, -0.05, 1] -> each minus the mean of the other three
    assert [a[0] for a in whole[2:6]] == pytest.approx([0.8 - 0.95 / 3, -1.75 / 3, -0.05 - 1.8 / 3, 1 - 0.75 / 3])
    assert got[0][2] == {"kl_penalty": pytest.approx(sum(p[0] for p in PENALTIES) / 2 / 8)} and got[1][2] == {}


def ppo_critic(demo_dir: str, folder: str, out) -> None:
    """In a process of its own: a PPO trainer rank updates its critic on one batch and saves it; a rank resumed from
    that checkpoint has the same critic, a new one (a fresh value head) does not."""
    import os

    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    import torch

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.experience import Experience
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer import batch as batches
    from trinity.runtime.trainer.rank import TrainerRank

    overrides = ("hardware=cpu", "+stages.1.algorithm.algorithm_type=ppo", "buffer.train_batch_size=8")
    config = resolve(Request(None, overrides)).stage("grpo")
    os.environ.update(get_platform("cpu").verl_env())
    port, model = free_port(), f"{demo_dir}/model"

    def rank(resume=None):
        trainer = TrainerRank(name="trainer_node0.rank0", role="trainer", config=config, rank=0, world_size=1)
        trainer.setup("127.0.0.1", port, model, 4, None, resume)
        return trainer

    exps = [Experience([3, 4, 5], [6, 7], [-1.0, -1.0], reward=float(i % 2), group=f"g{i // 4}") for i in range(8)]
    tensors = batches.padded(exps, 0)
    trained = rank()
    before = trained.critic.values(tensors)
    trained.whole = exps  # rank 0's step batch, as taken from the buffer
    _, _, (batch, values, returns, total) = trained._tensors(exps)  # the critic's values, GAE
    extra = trained.critic.update(batch, values, returns, total)
    after = trained.critic.values(tensors)
    trained.save(folder, 1, hf=False)
    out.put(
        {
            "critic_loss": extra["critic_loss"],
            "moved": not torch.allclose(before, after),
            "resumed": torch.allclose(rank(folder).critic.values(tensors), after),
            "fresh": torch.allclose(rank().critic.values(tensors), after),
        }
    )


@pytest.mark.train  # a real verl trainer rank with a critic, in a process of its own
def test_a_ppo_trainer_updates_its_critic_and_a_resume_restores_it(demo_assets, tmp_path):
    seen = spawned(ppo_critic, str(demo_assets), str(tmp_path / "global_step_1"))
    assert seen["critic_loss"] > 0 and seen["moved"], seen  # one update moved the value head
    assert seen["resumed"] and not seen["fresh"], seen  # the saved critic comes back; a new one is not it
    assert (tmp_path / "global_step_1" / "critic_state").is_dir()
