"""`trinity run` with a LoRA adapter, as a user runs it: the shortened demo trains the adapter through a stage
transition (the next stage goes on training the first stage's adapter), syncs only the adapter to the engines,
checkpoints it in PEFT's layout (and the merged model on request), and bench evaluates those checkpoints; on the
real vLLM too, its engine killed mid-run and replaced. tests/runtime/weights/test_lora.py, test_transformers_engine.py
and test_vllm_lora_real.py check the tensors; this checks what a run leaves behind."""

import importlib.util
import os

import pytest

from tests.cli.test_run import GRPO_ONLY, RUN, SHORT, lines, shared_run, trinity
from tests.cli.test_run_replacements import finished, signalled_at, started
from tests.runtime.rollout.test_vllm_real import NO_VLLM

torch = pytest.importorskip("torch")
pytest.importorskip("verl")

pytestmark = pytest.mark.ray
LORA = "+model.lora_configs=[{lora_rank: 8, lora_alpha: 16, target_modules: 'q_proj,v_proj,up_proj'}]"
ADAPTED = ("q_proj", "v_proj", "up_proj")


@pytest.fixture(scope="module")
def lora_run(shared_run_env, tmp_path_factory):
    """SFT then GRPO, both on one adapter, a checkpoint with the merged model at every step."""
    return shared_run(
        shared_run_env,
        tmp_path_factory,
        "lora",
        *SHORT,
        LORA,
        "trainer.save_interval=1",
        "trainer.save_hf_checkpoint=always",
        "trainer.save_merged_model=true",
        "algorithm.kl_loss_fn=low_var_kl",  # the reference is the actor with its adapter off
    )


def checkpoint(run, step: int):
    return run.folder / RUN / "checkpoints" / f"global_step_{step}"


def adapter(run, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(str(checkpoint(run, step) / "adapter_model.safetensors"))


@pytest.mark.train
def test_a_lora_run_syncs_the_adapter_and_checkpoints_it_in_peft_layout(lora_run):
    assert lora_run.proc.returncode == 0, lora_run.proc.stderr[-3000:]
    run = lora_run.folder / RUN
    syncs = lines(run, "synchronizer")
    assert [(s["method"], s["weight_version"]) for s in syncs] == [("gloo", 4), ("gloo", 5), ("gloo", 6)]
    assert all(r["experiences"] == 16 and r["weight_version"] == r["step"] - 1 for r in lines(run, "explorer"))
    for step in range(1, 7):
        files = set(os.listdir(checkpoint(lora_run, step)))
        assert {"adapter_config.json", "adapter_model.safetensors", "config.json", "tokenizer.json"} <= files
        assert "model.safetensors" not in files  # the base is not copied into every checkpoint
        assert "model.safetensors" in os.listdir(checkpoint(lora_run, step) / "merged")
    names = sorted(adapter(lora_run, 6))
    assert names and all(n.split(".lora_")[0].endswith(ADAPTED) for n in names)
    assert len(names) == 2 * len(ADAPTED) * 2  # A and B of three modules in each of the demo's two layers


@pytest.mark.train
def test_only_the_adapter_has_optimizer_state(lora_run):
    assert lora_run.proc.returncode == 0, lora_run.proc.stderr[-3000:]
    state = torch.load(checkpoint(lora_run, 6) / "trainer_state" / "optim_world_size_1_rank_0.pt", weights_only=False)[
        "state"
    ]
    moments = sum(s["exp_avg"].numel() for s in state.values())
    assert moments == sum(t.numel() for t in adapter(lora_run, 6).values())


@pytest.mark.train
def test_the_next_stage_goes_on_training_the_adapter_and_merged_is_base_plus_adapter(lora_run, demo_assets):
    """The grpo stage starts from the sft stage's adapter (not a fresh one, whose B is zero): one step apart, B moved
    little. merged/ is the demo model plus that adapter, as peft merges it."""
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    assert lora_run.proc.returncode == 0, lora_run.proc.stderr[-3000:]
    sft, grpo = adapter(lora_run, 3), adapter(lora_run, 4)
    b = [n for n in sft if ".lora_B." in n]
    assert all(sft[n].abs().sum() > 0 for n in b)
    assert sum((grpo[n] - sft[n]).norm() for n in b) < 0.5 * sum(sft[n].norm() for n in b)
    base = AutoModelForCausalLM.from_pretrained(str(demo_assets / "model"), dtype=torch.float32)
    expected = PeftModel.from_pretrained(base, str(checkpoint(lora_run, 4))).merge_and_unload().state_dict()
    merged = load_file(str(checkpoint(lora_run, 4) / "merged" / "model.safetensors"))
    assert max((merged[n] - expected[n]).abs().max().item() for n in merged) < 1e-5


@pytest.mark.train
def test_merged_sync_hands_the_engines_full_weights_and_bench_evaluates_the_merged_checkpoints(run_env, tmp_path):
    args = (
        *GRPO_ONLY,
        LORA,
        "synchronizer.lora_sync=merged",
        "trainer.save_merged_model=true",
        "buffer.total_steps=2",
        "trainer.save_interval=1",
        "trainer.save_hf_checkpoint=always",
    )
    trained = trinity(run_env, tmp_path, *args)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert [(s["method"], s["weight_version"]) for s in lines(tmp_path / RUN, "synchronizer")] == [
        ("gloo", 1),
        ("gloo", 2),
    ]
    done = os.path.getmtime(tmp_path / RUN / "checkpoints" / "global_step_2" / "state.json")
    bench = trinity(run_env, tmp_path, *args, "mode=bench")
    assert bench.returncode == 0, bench.stderr[-3000:]
    assert [e["step"] for e in lines(tmp_path / RUN, "eval") if e["time"] > done] == [1, 2]


@pytest.mark.train
@pytest.mark.vllm
@pytest.mark.timeout(1200)  # two vLLM starts: the engine's and its replacement's
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason=NO_VLLM)  # looked up: importing it here would
def test_a_lora_run_on_the_real_vllm_applies_each_synced_adapter_also_on_an_engine_replaced_mid_run(run_env, tmp_path):
    """vLLM's engine core (the process vLLM runs the model in, under the engine's actor) is killed (SIGKILL) mid-run
    (issue 49): the actor, left with a dead engine, ends its process (rollout/vllm_core_watch.py), and a new engine
    starts on its bundle with the base model, joins the weight-sync group formed anew, takes the current adapter, and
    the failed explore step runs again on it; every step is explored and trained once, each on the adapter version it
    would have had. (A kill of the actor itself is the transformers engine's test_run_replacements.py case.)"""
    proc = started(
        run_env,
        tmp_path,
        *GRPO_ONLY,
        LORA,
        "explorer.rollout_model.engine_type=vllm",
        "buffer.total_steps=4",
        "trainer.save_interval=4",
    )
    signalled_at(proc, run_env, tmp_path, "rollout.engine0", 1, 0.5, actor_class="VllmEngine", child="VLLM::EngineCor")
    _, [restart] = finished(proc, tmp_path / RUN, ["rollout.engine0"], 4)
    assert restart["sync"].endswith("synced to the new engine over the weight-sync group formed anew"), restart
    run = tmp_path / RUN
    assert scheduled_syncs(lines(run), restart) == [("gloo", v) for v in (1, 2, 3, 4)]
    explorer = lines(run, "explorer")
    assert [(r["step"], r["weight_version"]) for r in explorer] == [(1, 0), (2, 1), (3, 2), (4, 3)]
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(
        os.listdir(run / "checkpoints" / "global_step_4")
    )


def scheduled_syncs(records: list[dict], restart: dict) -> list[tuple[str, int]]:
    """The run's syncs as the schedule has them: the replacement's own sync (the synchronizer line just before its
    restart record, of the version the restart names) is left out where the schedule's sync of that version also ran,
    the kill landing after it; where the kill ended that sync, the replacement's stood in for it and is kept."""
    syncs = [r for r in records if r["role"] in ("synchronizer", "restart")]
    at = next(i for i, r in enumerate(syncs) if r["role"] == "restart") - 1
    version = int(restart["sync"].split()[1].removeprefix("v"))
    assert syncs[at]["role"] == "synchronizer" and syncs[at]["weight_version"] == version, syncs
    versions = [r["weight_version"] for r in syncs if r["role"] == "synchronizer"]
    kept = [r for i, r in enumerate(syncs) if r["role"] == "synchronizer" and (i != at or versions.count(version) == 1)]
    return [(r["method"], r["weight_version"]) for r in kept]
