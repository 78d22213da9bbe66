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
