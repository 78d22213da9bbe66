"""What a checkpoint carries besides its weights: the model folder's own files, read once at setup."""

import pytest

from trinity.runtime.run_dir import STATE
from trinity.runtime.trainer.rank import companion_files


def test_a_checkpoint_carries_the_models_files_but_not_its_weights_or_state(tmp_path):
    files = ["config.json", "tokenizer.json", "chat_template.jinja", "modeling_tiny.py", "tokenizer.model"]
    skipped = ["model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "optimizer.pt", ".lock", STATE]
    for name in files + skipped:
        (tmp_path / name).write_bytes(name.encode())
    (tmp_path / "trainer_state").mkdir()  # verl's optimizer state: a folder, never copied
    assert companion_files(tmp_path) == {name: name.encode() for name in sorted(files)}


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
    out.put(
        {
            "specs": sorted({s.dtype for s in rank.weight_specs()}),
            "engine": dtypes(rank.engine_weights()),
            "full": dtypes(rank.full_weights()),
        }
    )


@pytest.mark.train  # a real verl trainer rank, in a process of its own
def test_weights_travel_to_the_engines_in_the_rollout_dtype_when_it_is_narrower(demo_assets):
    """A bf16 rollout gets bf16 weights from an fp32 trainer (half the bytes); checkpoints keep the trainer's fp32."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    seen = {}
    for rollout_dtype in ("bfloat16", "float32"):
        out = ctx.Queue()
        proc = ctx.Process(target=weights_as_sent, args=(str(demo_assets), rollout_dtype, out))
        proc.start()
        seen[rollout_dtype] = out.get(timeout=240)
        proc.join(60)
        assert proc.exitcode == 0
    assert seen["bfloat16"] == {"specs": ["bfloat16"], "engine": ["torch.bfloat16"], "full": ["torch.float32"]}
    assert seen["float32"] == {"specs": ["float32"], "engine": ["torch.float32"], "full": ["torch.float32"]}


def lora_update(demo_dir: str, out) -> None:
    """In a process of its own: a bf16 LoRA trainer rank with a KL loss takes one update on a batch of its own."""
    import os

    os.environ["TRINITY_DEMO_DIR"] = demo_dir
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.platforms import get_platform
    from trinity.runtime.experience import Experience
    from trinity.runtime.sync.group import free_port
    from trinity.runtime.trainer import functions
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
    batch, _ = rank._tensors(list(zip(exps, functions.advantages(exps, config.algorithm))))
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
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=lora_update, args=(str(demo_assets), out))
    proc.start()
    seen = out.get(timeout=240)
    proc.join(60)
    assert proc.exitcode == 0
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
