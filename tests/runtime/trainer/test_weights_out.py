"""The weights a trainer rank sends the engines: in the dtype the engines keep them in, and in a memory sync's pieces
that split back into the same weights."""

import pytest

from tests.runtime.trainer.spawn import spawned


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
    from trinity.runtime.trainer.weights_out import rollout_dtype

    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    overrides = ("hardware=cpu", "~stages", "+model.lora_configs=[{lora_rank: 8}]", *extra)
    config = resolve(Request(None, overrides)).config
    assert rollout_dtype(config) == getattr(torch, dtype)
