"""What a process of the run holds, and how its peak is measured: the role processes that hold no model import no
torch (each torch process holds ~250 MiB of its own)."""

import ast
import importlib.util
import subprocess
import sys

import pytest

from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.launch.plan import build_plan
from trinity.runtime.driver.factory import role_factory


def loaded_after(code: str) -> list[str]:
    """Which of torch, transformers and verl a fresh interpreter holds after `code`."""
    probe = f"{code}\nimport sys; print([m for m in ('torch', 'transformers', 'verl') if m in sys.modules])"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return ast.literal_eval(proc.stdout.strip().splitlines()[-1])


def test_taking_a_trainer_ranks_handle_imports_no_torch_until_the_rank_works():
    """Ray imports the class's module wherever a handle is taken (the driver takes every rank's)."""
    assert loaded_after("import trinity.runtime.trainer.rank") == []
    assert loaded_after(
        "import trinity.runtime.trainer.rank, trinity; trinity.runtime.trainer.step.batches.padded"
    ) == ["torch"]
    # bound on its package as an import binds it: mock.patch("trinity.runtime.trainer.batch.x") walks attributes
    assert loaded_after("import trinity.runtime.trainer.rank as rank, trinity; trinity.runtime.trainer.batch") == []


@pytest.mark.parametrize("data_set,loaded", [(False, []), (True, ["torch", "transformers"])])
def test_the_buffer_warms_the_tokenizers_imports_only_to_serve_a_data_set(tmp_path, data_set, loaded):
    code = (
        "from trinity.config.schema.buffer import StorageConfig; from trinity.runtime.buffer.actor import "
        f"ExperienceBuffer; ExperienceBuffer(storage=StorageConfig(name='q'), run_dir={str(tmp_path)!r}, "
        f"data_set={data_set}, name='buffer', role='buffer').warm()"
    )
    assert loaded_after(code) == loaded


@pytest.mark.parametrize("prompt_type,loaded", [("plaintext", []), ("messages", ["torch", "transformers"])])
def test_the_explorer_warms_hugging_faces_tokenizer_only_for_chat_prompts(demo_assets, prompt_type, loaded):
    """Plain-text prompts are encoded by the engine's tokenizer backend (runtime/data/tokenizer.py) alone."""
    code = (
        f"import os; os.environ['TRINITY_DEMO_DIR'] = {str(demo_assets)!r}; from trinity.config.compose import "
        "Request; from trinity.config.resolve import resolve; from trinity.runtime.explorer.role import Explorer; "
        "config = resolve(Request(None, ('hardware=cpu', '~stages', "
        f"'buffer.explorer_input.eval_tasksets.0.format.prompt_type={prompt_type}'))).config; "
        "Explorer(name='explorer', role='explorer', config=config, run_dir='.').warm()"
    )
    assert loaded_after(code) == loaded


@pytest.mark.parametrize("stage,data_set", [(0, True), (1, False)])
def test_the_demos_sft_buffer_serves_a_data_set_and_its_grpo_buffer_does_not(
    demo_assets, monkeypatch, tmp_path, stage, data_set
):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    _, config = resolve(Request(None, ("hardware=cpu",))).stages[stage]
    buffer = next(a for a in build_plan(config).actors if a.role == "buffer")
    _, kwargs = role_factory(config, tmp_path)(buffer)
    assert kwargs["data_set"] is data_set


def test_a_process_reports_its_own_peak_not_the_peak_of_the_process_that_started_it():
    """ru_maxrss survives exec: a driver started by a big process would report that process's memory."""
    ballast = bytearray(600 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # resident, page by page
    code = "from trinity.runtime.roles.base import peak_rss_mb; print(peak_rss_mb())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and float(proc.stdout) < 300, (proc.stdout, proc.stderr[-2000:])
    assert len(ballast) == 600 * 2**20


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed: nothing to keep out")
def test_a_trainer_rank_imports_verls_workers_without_vllm():
    """verl's checkpoint engines import vLLM where it is installed (~2 s, ~45 MiB); a trainer rank never runs it."""
    probe = (
        "import sys; from trinity.runtime.trainer import rank; rank.TrainerRank.WARM == "
        "('trinity.runtime.verl.workers',) or sys.exit('WARM'); import trinity.runtime.verl.workers; from "
        "verl.checkpoint_engine import HCCLCheckpointEngine; print(HCCLCheckpointEngine, 'vllm' in sys.modules); "
        "import vllm; print(vllm.__name__)"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # verl holds no HCCL engine, nothing of vLLM's was imported, and vLLM still imports afterwards
    assert proc.stdout.split() == ["None", "False", "vllm"]
