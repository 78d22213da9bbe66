"""What a role actor kept for the run's next stage does with that stage's arguments (Role.restage), in this process:
what it keeps, what it drops, and when it refuses (then the launch starts a new actor)."""

import pytest

from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.runtime.explorer.role import Explorer
from trinity.runtime.rollout.transformers_engine import TransformersEngine
from trinity.runtime.rollout.vllm_engine import VllmEngine
from trinity.runtime.trainer.rank import TrainerRank

IDENTITY = {"name": "trainer_node0.rank0", "role": "trainer"}


@pytest.fixture(scope="module")
def stages(demo_assets):
    import os

    os.environ["TRINITY_DEMO_DIR"] = str(demo_assets)
    resolved = resolve(Request(None, ("hardware=cpu",)))
    return resolved.stage("sft_warmup"), resolved.stage("grpo")


def test_a_kept_trainer_rank_takes_the_next_stage_and_drops_what_the_last_built(stages):
    sft, grpo = stages
    rank = TrainerRank(config=sft, rank=0, world_size=1, **IDENTITY)
    rank.workers, rank.built = object(), object()  # what setup builds
    assert rank.restage(config=grpo, rank=0, world_size=1, **IDENTITY) is True
    assert rank.config is grpo and rank.workers is None and not hasattr(rank, "built")
    assert rank.name == IDENTITY["name"]


def registered(group) -> bool:
    import torch.distributed as dist

    return group in dist.distributed_c10d._world.pg_map


def test_a_kept_trainer_rank_or_engine_leaves_its_stages_weight_sync_group(stages):
    """Torch keeps every group it made, with its communicator, until it is destroyed: a role kept stage after stage
    would pile one up per stage. The next stage forms its own."""
    from trinity.runtime.sync import group

    sft, grpo = stages
    rank = TrainerRank(config=grpo, rank=0, world_size=1, **IDENTITY)
    rank.sync_group = joined = group.join("gloo", "127.0.0.1", group.free_port(), 0, 1, 30, "rollout_weight_sync")
    assert registered(joined)
    assert rank.restage(config=grpo, rank=0, world_size=1, **IDENTITY) is True
    assert not registered(joined) and rank.sync_group is None
    engine = TransformersEngine(config=grpo, index=0, name="rollout.engine0", role="rollout")
    engine._group = joined = group.join("gloo", "127.0.0.1", group.free_port(), 0, 1, 30, "rollout_weight_sync")
    assert engine.restage(config=grpo, index=0, name="rollout.engine0", role="rollout") is True
    assert not registered(joined) and engine._group is None


@pytest.mark.parametrize(
    "change",
    [{"world_size": 2}, {"rank": 1}, {"backend": "cpu:gloo,cuda:nccl"}, {"fused": False}],
    ids=["world size", "rank", "backend", "fused kernels off"],
)
def test_a_trainer_rank_refuses_a_stage_with_another_process_group_or_model_class(stages, change):
    sft, grpo = stages
    rank = TrainerRank(config=sft, rank=0, world_size=1, **IDENTITY)
    trainer = {"process_group_backend": change.get("backend"), "use_fused_kernels": change.get("fused")}
    trainer = {k: v for k, v in trainer.items() if v is not None}
    grpo = grpo.model_copy(update={"trainer": grpo.trainer.model_copy(update=trainer)})
    kwargs = {"rank": change.get("rank", 0), "world_size": change.get("world_size", 1)}
    assert rank.restage(config=grpo, **kwargs, **IDENTITY) is False
    assert rank.config is sft  # untouched: the launch kills it and starts a new one


def test_a_kept_explorer_stops_its_workflow_threads(stages):
    _, grpo = stages
    from concurrent.futures import ThreadPoolExecutor

    explorer = Explorer(config=grpo, run_dir=".", name="explorer", role="explorer")
    pools = explorer.pools = [ThreadPoolExecutor(max_workers=1), ThreadPoolExecutor(max_workers=1)]  # one per engine
    assert explorer.restage(config=grpo, run_dir=".", name="explorer", role="explorer") is True
    assert all(pool._shutdown for pool in pools) and not hasattr(explorer, "pools")


def test_an_engine_that_never_started_vllm_is_not_kept_and_a_transformers_engine_is(stages):
    _, grpo = stages
    identity = {"name": "rollout.engine0", "role": "rollout", "index": 0}
    assert VllmEngine(config=grpo, **identity).restage(config=grpo, **identity) is False
    engine = TransformersEngine(config=grpo, **identity)
    engine.model = object()
    assert engine.restage(config=grpo, **identity) is True and not hasattr(engine, "model")
