"""The weights a trainer rank sends the engines: in the dtype the engines keep them in, and in a memory sync's pieces
that split back into the same weights."""

import pytest

from tests.runtime.trainer.spawn import spawned, two_ranks


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


def colocated_sync(rank: int, port: int, demo_dir: str, engines: int, out) -> None:
    """In a process of its own: trainer rank `rank` of 2 (gloo), beside `engines` rollout devices (colocate), runs one
    device_ipc sync, its allocator started with the GPU profiles' expandable segments. What cannot exist here is faked
    behind the real interface: the device IPC handle (`device_ipc.export`, which records what it was given), and the
    cpu platform's channel is set to the one the GPU profiles derive."""
    import os
    import weakref

    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"  # profiles/a100.yaml's trainer setting
    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    import torch

    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.sync import device_ipc, pieces
    from trinity.runtime.trainer import weights_out
    from trinity.runtime.trainer.rank import TrainerRank

    overrides = (
        "hardware=cpu",
        "mode=colocate",
        "cluster.gpu_per_node=2",
        f"explorer.rollout_model.engine_num={engines}",
    )
    config = resolve(Request(None, (*overrides, "explorer.rollout_model.dtype=bfloat16"))).stage("grpo")
    config = config.model_copy(
        update={"synchronizer": config.synchronizer.model_copy(update={"sync_channel": "device_ipc"})}
    )
    os.environ.update(get_platform("cpu").verl_env())
    os.environ[device_ipc.NODE_ENV] = "node-a"  # no Ray here: the node its actor would record
    alive: list = []  # weakrefs to every weight FSDP gathered for the sync
    gathered = weights_out.WeightsOut.gathered

    def watched(self, *args, **kwargs):
        for name, tensor in gathered(self, *args, **kwargs):
            alive.append(weakref.ref(tensor))
            yield name, tensor

    exported = []

    def export(buffer, key):
        held = [r() for r in alive if r() is not None]
        exported.append(
            {
                "settings": torch._C._accelerator_getAllocatorSettings(),
                "dtype": str(buffer.dtype),
                "sum": float(buffer.double().sum()),
                "gathered_held": len(held),
                "key": key,
            }
        )
        return {key: b"handle"}

    weights_out.WeightsOut.gathered, device_ipc.export = watched, export
    trainer = TrainerRank(name=f"trainer_node0.rank{rank}", role="trainer", config=config, rank=rank, world_size=2)
    trainer.setup("127.0.0.1", port, f"{demo_dir}/model", 1, None)
    plan = pieces.plan(trainer.weight_specs(), config.synchronizer.bucket_bytes)
    handles = [trainer.weight_piece(index, len(piece)) for index, piece in enumerate(plan)]
    trainer.end_weight_pieces()
    after = torch._C._accelerator_getAllocatorSettings()
    engine = trainer.engine_weights()  # every rank takes part; rank 0 keeps them
    sums = [float(pieces.flatten(list(engine.values())[: len(plan[0])]).double().sum())] if engine else []
    out.put((rank, {"handles": handles, "exported": exported, "after": after, "pieces": len(plan), "sums": sums}))


@pytest.mark.train  # two real verl trainer ranks, each in a process of its own
def test_a_colocated_sync_exports_from_ranks_beside_an_engine_in_ordinary_segments_and_the_rollout_dtype(demo_assets):
    """One engine device beside two trainer ranks (engine_num 1, the default): only rank 0 exports; rank 1 takes part
    in the gathers and exports nothing, since a handle nobody opens pins its buffer for good. Two engines: both
    export. Every buffer is in the rollout dtype (bf16 from an fp32 trainer) and holds the engines' weights, filled a
    weight at a time (what the rank still holds of the gathered weights at the export is the one its gather holds
    until the next); the allocator runs ordinary segments while the sync exports and expandable ones again after."""
    one, two = (two_ranks(colocated_sync, str(demo_assets), n, timeout=240) for n in (1, 2))
    assert one[1]["handles"] == [{}] * one[1]["pieces"] and one[1]["exported"] == []
    assert [list(h) for h in one[0]["handles"]] == [["node-a:0"]] * one[0]["pieces"]
    for rank in (one[0], two[0], two[1]):
        assert rank["exported"] and all(e["dtype"] == "torch.bfloat16" for e in rank["exported"])
        assert all(e["settings"] == "expandable_segments:False" for e in rank["exported"])
        assert all(e["gathered_held"] <= 1 for e in rank["exported"])
        assert rank["exported"][0]["sum"] == pytest.approx(two[0]["sums"][0], rel=1e-6)
    assert all(rank["after"] == "expandable_segments:True" for rank in (*one.values(), *two.values()))
