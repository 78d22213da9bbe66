"""`trinity run` trains for real: the shortened embedded demo on a real local Ray, as a user runs it.

These tests assert on what a run leaves behind (metrics.jsonl, checkpoints, the config it saved),
not on log text. Where two tests' settings do not touch each other's assertions, one run (a module-scoped
fixture) serves both; each test still asserts that run's exit code and its own outputs.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = pytest.mark.ray  # each test runs trinity run on the session's Ray; `train` marks those that train

# The demo, shortened: 3 SFT steps, then 3 GRPO steps of 4 tasks x 4 rollouts; a Ray of its own where run_env names
# none (own_ray): $RAY_ADDRESS, the session's, wins over the key.
SHORT = (
    "stages.0.buffer.total_steps=3",
    "stages.0.buffer.train_batch_size=16",
    "buffer.total_steps=3",
    "buffer.batch_size=4",
    "algorithm.repeat_times=4",
    "trainer.save_interval=0",
    "cluster.ray_address=local",
)
GRPO_ONLY = ("~stages", *SHORT[2:])
RUN = "ckpt/trinity-demo/arith"


@pytest.fixture
def env(run_env):
    return run_env


def trinity(env, cwd, *args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "trinity", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stopped_after_checkpoint(env, cwd: Path, *args, step: int = 2) -> int:
    """`trinity run` stopped with SIGTERM once it saved the checkpoint of train step `step`: the run ends 143 with
    nothing half-written; returns the last checkpoint's step (the stop may land after a later one)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trinity", "run", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    checkpoints = cwd / RUN / "checkpoints"
    deadline = time.monotonic() + 400
    while not (checkpoints / f"global_step_{step}" / "state.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    assert not [p for p in os.listdir(checkpoints) if p.startswith(".")]  # nothing half-written is left
    return max(int(p.split("_")[-1]) for p in os.listdir(checkpoints) if p.startswith("global_step_"))


def summary_column(stdout: str, column: str) -> dict[str, str]:
    """Each stage's value in `column` (one before EVAL) of the summary table a run printed."""
    rows = [line.split() for line in stdout.splitlines()]
    header = next(row for row in rows if row[:2] == ["STAGE", "MODE"])
    at = header.index(column)
    return {row[0]: row[at] for row in rows[rows.index(header) + 1 :] if len(row) > at and not row[0].endswith(":")}


def lines(run_dir: Path, role=None) -> list[dict]:
    """metrics.jsonl's records (of `role`); a last line without its newline is still being written, and is left out."""
    text = (run_dir / "metrics.jsonl").read_text()
    records = [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]
    return [r for r in records if role is None or r["role"] == role]


def shared_run(shared_run_env, tmp_path_factory, name, *args):
    """One `trinity run` in a folder of its own, for the tests of this module that read it."""
    folder = tmp_path_factory.mktemp(name)
    env = shared_run_env(folder)
    return SimpleNamespace(proc=trinity(env, folder, *args), folder=folder, env=env, args=args)


# GRPO for 2 steps, saving Hugging Face weights at every step, with the old log-probs recomputed by the trainer, the
# weights synced through memory: the bench test reads the checkpoints, the log-prob test the trainer's records, the
# sync test the synchronizer's.
HF_EVERY_STEP_RECOMPUTED = (
    *GRPO_ONLY,
    "buffer.total_steps=2",
    "trainer.save_interval=1",
    "trainer.save_hf_checkpoint=always",
    "algorithm.bypass_old_logprobs=false",
    "synchronizer.sync_method=memory",
)


@pytest.fixture(scope="module")
def hf_every_step(shared_run_env, tmp_path_factory):
    return shared_run(shared_run_env, tmp_path_factory, "hf_every_step", *HF_EVERY_STEP_RECOMPUTED)


@pytest.fixture(scope="module")
def short_prompts(shared_run_env, tmp_path_factory):
    """One GRPO step whose prompts (the demo's are 4 to 6 tokens) a budget of 3 cuts, reported as JSON: the prompt test
    reads its experiences (kept in the run directory by a file store) and logs, the JSON test its report."""
    return shared_run(
        shared_run_env,
        tmp_path_factory,
        "short_prompts",
        *GRPO_ONLY,
        "buffer.total_steps=1",
        "model.max_prompt_tokens=3",
        "model.repetition_penalty=1.2",
        "buffer.trainer_input.experience_buffer.storage_type=file",
        "--format",
        "json",
        "--quiet",
    )


@pytest.fixture(scope="module")
def trusted_code_run(shared_run_env, tmp_path_factory, remote_code_model):
    """One GRPO step of a model defined by its own code, trusted: the checkpoint test reads its checkpoint, the
    finished-run test runs it again."""
    return shared_run(
        shared_run_env,
        tmp_path_factory,
        "trusted_code",
        *GRPO_ONLY,
        "buffer.total_steps=1",
        "trainer.save_interval=1",
        f"model.model_path={remote_code_model}",
        "model.trust_remote_code=true",
    )


@pytest.mark.train
def test_both_mode_trains_through_a_stage_transition_with_gloo_sync(env, tmp_path):
    # grpo saves every step and keeps two: its third save comes after its source (global_step_3) was pruned
    proc = trinity(
        env,
        tmp_path,
        *SHORT,
        "stages.1.trainer.save_interval=1",
        "trainer.max_checkpoints_to_keep=2",
        "trainer.save_hf_checkpoint=always",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / RUN
    records = lines(run)
    assert all({"step", "role", "time", "stage"} <= set(r) for r in records)
    trainer = [(r["stage"], r["step"]) for r in lines(run, "trainer")]
    assert trainer == [("sft_warmup", 1), ("sft_warmup", 2), ("sft_warmup", 3), ("grpo", 4), ("grpo", 5), ("grpo", 6)]
    assert all(r["loss"] is not None and r["grad_norm"] is not None and r["lr"] > 0 for r in lines(run, "trainer"))
    syncs = lines(run, "synchronizer")
    assert [(s["method"], s["weight_version"]) for s in syncs] == [("gloo", 4), ("gloo", 5), ("gloo", 6)]
    explorer = lines(run, "explorer")
    # fixed style, interval 1: explore step s is generated by the weights of train step s - 1
    assert [(r["step"], r["weight_version"]) for r in explorer] == [(4, 3), (5, 4), (6, 5)]
    assert all(
        r["experiences"] == 16 and 0 <= r["reward_mean"] <= 1 and r["tokens_per_s"] > 0 and r["truncated_prompts"] == 0
        for r in explorer
    )
    assert [r["engine_calls"] for r in explorer] == [1, 1, 1]  # a step's 16 requests reach the engine as one call
    # step 4: the start's evaluation, explore, train; then also the checkpoint after the step before, and the sync's
    # two (trainer rank 0 broadcasts, the engine receives)
    assert [r["driver_calls"] for r in lines(run, "trainer") if r["stage"] == "grpo"] == [3, 5, 5]
    evals = lines(run, "eval")
    assert [(e["step"], e["taskset"]) for e in evals] == [(3, "arith-heldout"), (6, "arith-heldout")]
    assert sorted(os.listdir(run / "checkpoints")) == ["global_step_5", "global_step_6"]
    for step in (5, 6):
        folder = run / "checkpoints" / f"global_step_{step}"
        assert {"config.json", "model.safetensors", "tokenizer.json", "state.json"} <= set(os.listdir(folder))
    state = json.loads((run / "checkpoints" / "global_step_6" / "state.json").read_text())
    assert (state["stage"], state["stage_step"], state["stage_total"], state["mode"]) == ("grpo", 3, 3, "both")
    assert (run / "config.yaml").read_text().startswith("# sha256: ")
    assert "sft_warmup" in proc.stdout and "grpo" in proc.stdout and "arith-heldout" in proc.stdout  # the summary table
    assert {"explorer.log", "trainer_node0.rank0.log"} <= set(os.listdir(run / "logs"))
    # the cpu profile trains SFT on GRPO's trainer slot (cluster.train_stage_devices: trainer), and GRPO's engine,
    # explorer start beside it: GRPO keeps every actor, and says so
    assert proc.stderr.count("kept running from the previous stage:") == 1
    kept = "trainer_node0.rank0, rollout.engine0, explorer, buffer"
    assert f"kept running from the previous stage: {kept}\n" in proc.stderr
    kept, setup = summary_column(proc.stdout, "KEPT"), summary_column(proc.stdout, "SETUP")
    assert summary_column(proc.stdout, "RESTARTS") == {"sft_warmup": "0", "grpo": "0"}
    assert kept == {"sft_warmup": "0/2", "grpo": "4/4"} and float(setup["grpo"].rstrip("s")) > 0
    assert 0.5 < float(summary_column(proc.stdout, "MEMORY")["grpo"].removesuffix("GiB")) < 8  # four roles + driver


@pytest.mark.train
def test_the_json_report_gives_each_processs_peak_and_the_explorer_holds_no_model_library(short_prompts):
    proc = short_prompts.proc
    assert proc.returncode == 0, proc.stderr[-3000:]
    [stage] = json.loads(proc.stdout)["stages"]
    peaks = stage["peak_rss_mb"]
    assert set(peaks) == {"trainer_node0.rank0", "rollout.engine0", "explorer", "buffer", "driver"}
    # plain-text prompts: the explorer encodes with the engine's tokenizer backend, without transformers and torch
    # (~390 MiB); the engine and the trainer rank hold both
    assert peaks["explorer"] < 300 < min(peaks["rollout.engine0"], peaks["trainer_node0.rank0"])


@pytest.mark.train
def test_checkpoints_are_hugging_face_models_that_bench_evaluates(hf_every_step):
    assert hf_every_step.proc.returncode == 0, hf_every_step.proc.stderr[-3000:]
    tmp_path, env = hf_every_step.folder, hf_every_step.env
    probe = (
        "import sys; from transformers import AutoModelForCausalLM as M; m = M.from_pretrained(sys.argv[1]); "
        "print(sum(p.numel() for p in m.parameters()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / RUN / "checkpoints" / "global_step_1")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and int(out.stdout.split()[-1]) > 500_000
    # algorithm.* must stay as trained (a changed algorithm is another run); the rest is GRPO_ONLY's
    bench = trinity(env, tmp_path, *GRPO_ONLY, "algorithm.bypass_old_logprobs=false", "mode=bench")
    assert bench.returncode == 0, bench.stderr[-3000:]
    evals = [
        (e["step"], e["stage"])
        for e in lines(tmp_path / RUN, "eval")
        if e["time"] > os.path.getmtime(tmp_path / RUN / "checkpoints" / "global_step_2" / "state.json")
    ]
    assert evals == [(1, None), (2, None)]  # every saved checkpoint, in order


@pytest.mark.train
def test_bench_on_the_latest_checkpoint_evaluates_that_one_only(hf_every_step):
    """explorer.bench_on_latest_checkpoint: bench evaluates the run's last complete checkpoint (step 2 of 1 and 2),
    as Trinity-RFT's Explorer.benchmark, and says nothing of the others."""
    assert hf_every_step.proc.returncode == 0, hf_every_step.proc.stderr[-3000:]
    tmp_path, env = hf_every_step.folder, hf_every_step.env
    started = time.time()
    bench = trinity(
        env,
        tmp_path,
        *GRPO_ONLY,
        "algorithm.bypass_old_logprobs=false",
        "mode=bench",
        "+explorer.bench_on_latest_checkpoint=true",
    )
    assert bench.returncode == 0, bench.stderr[-3000:]
    assert "bench_on_latest_checkpoint" not in bench.stderr  # read, not noted as changing nothing
    evals = [(e["step"], e["stage"]) for e in lines(tmp_path / RUN, "eval") if e["time"] > started]
    assert evals == [(2, None)]


@pytest.mark.train
def test_memory_sync_moves_each_steps_weights(hf_every_step):
    assert hf_every_step.proc.returncode == 0, hf_every_step.proc.stderr[-3000:]
    run = hf_every_step.folder / RUN
    assert [(s["method"], s["weight_version"]) for s in lines(run, "synchronizer")] == [("memory", 1), ("memory", 2)]
    assert [r["weight_version"] for r in lines(run, "explorer")] == [0, 1]


@pytest.mark.train
def test_checkpoint_sync_in_one_run(env, tmp_path):
    proc = trinity(
        env,
        tmp_path,
        *GRPO_ONLY,
        "buffer.total_steps=2",
        "synchronizer.sync_method=checkpoint",
        "algorithm.kl_loss_fn=low_var_kl",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    syncs = lines(tmp_path / RUN, "synchronizer")
    assert [(s["method"], s["weight_version"]) for s in syncs] == [("checkpoint", 1), ("checkpoint", 2)]
    assert [r["weight_version"] for r in lines(tmp_path / RUN, "explorer")] == [0, 1]
    assert not list((tmp_path / RUN / "sync").glob("*"))  # sync files are removed once loaded


@pytest.mark.train
def test_colocate_takes_turns_on_the_shared_devices_and_syncs_through_memory(env, tmp_path):
    """mode: colocate: trainer ranks and the engine share devices, so the engines sleep before train steps and
    wake before explore steps (each handoff is a `devices` record), explore and train steps never overlap, even
    where the sync interval lets the explorer run ahead in `both`, and weights move by memory sync."""
    proc = trinity(
        env,
        tmp_path,
        *GRPO_ONLY,
        "mode=colocate",
        "buffer.total_steps=4",
        "synchronizer.sync_interval=2",
        "explorer.eval_interval=2",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [r for r in lines(tmp_path / RUN) if r["role"] in ("explorer", "trainer", "devices", "synchronizer")]
    events = [(r["role"], r.get("holder") or r["step"]) for r in records]
    turns = [
        ("explorer", 1),
        ("explorer", 2),
        ("devices", "trainer"),
        ("trainer", 1),
        ("trainer", 2),
        ("devices", "sync"),  # the engine's weights wake for the sync; the rest once it is done
        ("devices", "rollout"),
        ("synchronizer", 2),
    ]
    later = [
        ("explorer", 3),
        ("explorer", 4),
        ("devices", "trainer"),
        ("trainer", 3),
        ("trainer", 4),
        ("devices", "sync"),
        ("devices", "rollout"),
        ("synchronizer", 4),
    ]
    assert events == turns + later  # a handoff comes only when the other side's calls have all returned
    # the engine slept while the trainer held the devices (it refuses to generate asleep) and its weights woke for
    # the sync: the transformers engine's whole model (it keeps no KV cache asleep)
    assert [(r["holder"], r["engines_asleep"]) for r in lines(tmp_path / RUN, "devices")] == [
        ("trainer", 1),
        ("sync", 0),
        ("rollout", 0),
    ] * 2
    assert [r["weight_version"] for r in lines(tmp_path / RUN, "explorer")] == [0, 0, 2, 2]
    assert {s["method"] for s in lines(tmp_path / RUN, "synchronizer")} == {"memory"}
    assert len(lines(tmp_path / RUN, "eval")) == 3  # at start, after step 2 and at the end: each on awake engines


@pytest.mark.train
def test_separate_sync_intervals_the_trainer_offers_every_3_steps_the_explorer_takes_every_2(env, tmp_path):
    """synchronizer.trainer_sync_interval 3, explorer_sync_interval 2, trainer_driven, in `both`: the trainer offers
    the weights of steps 3 and 6 and trains no further until they are taken; the explorer takes them only after an
    even explore step, and explores with the last weights taken. Explore and train run beside each other, so which
    check point takes step 3's weights depends on their speeds; what holds every time is asserted."""
    proc = trinity(
        env,
        tmp_path,
        *GRPO_ONLY,
        "buffer.total_steps=6",
        "synchronizer.sync_style=trainer_driven",
        "synchronizer.trainer_sync_interval=3",
        "synchronizer.explorer_sync_interval=2",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [r for r in lines(tmp_path / RUN) if r["role"] in ("explorer", "trainer", "synchronizer")]
    assert [r["weight_version"] for r in records if r["role"] == "synchronizer"] == [3, 6]
    explored, trained, version = 0, 0, 0
    for record in records:
        if record["role"] == "explorer":
            explored += 1
            assert record["weight_version"] == version  # the weights last taken
        elif record["role"] == "trainer":
            trained += 1
            assert trained <= version + 3  # no train step past an offer not yet taken
        else:
            version = record["weight_version"]
            if version == 3:
                assert explored in (4, 6) and trained == 3  # at a check point the explorer could reach; then waiting
    assert (explored, trained, version) == (6, 6, 6)
    saved = (tmp_path / RUN / "config.yaml").read_text()
    assert "explorer_sync_interval: 2" in saved and "trainer_sync_interval: 3" in saved


@pytest.mark.train
def test_fully_async_runs_two_explore_steps_at_once_and_syncs_beside_them(env, tmp_path):
    """sync_style fully_async with explorer.max_inflight_batches 2: the first two explore steps run at once on the
    explorer, every train step's weights reach the engines as offered, and no explore step starts more than
    max_inflight_batches steps past the trainer (so none explores with weights older than step - 2)."""
    proc = trinity(
        env,
        tmp_path,
        *GRPO_ONLY,
        "buffer.total_steps=5",
        "synchronizer.sync_style=fully_async",
        "explorer.max_inflight_batches=2",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = lines(tmp_path / RUN)
    explored = [r for r in records if r["role"] == "explorer"]
    assert sorted(r["step"] for r in explored) == [1, 2, 3, 4, 5]
    assert [r["steps_in_flight"] for r in explored if r["step"] <= 2] == [2, 2]  # started together
    assert all(r["weight_version"] >= r["step"] - 2 for r in explored)
    assert [r["weight_version"] for r in records if r["role"] == "synchronizer"] == [1, 2, 3, 4, 5]
    assert "sync_style: fully_async" in (tmp_path / RUN / "config.yaml").read_text()


def test_colocate_stops_at_once_when_one_explore_step_cannot_fill_a_train_batch(env, tmp_path):
    """Trainer and engine take turns: a train step that waited for more experiences would hold the devices for
    synchronizer.sync_timeout while no explore step can run. The run ends at once, saying why."""
    proc = trinity(env, tmp_path, *GRPO_ONLY, "mode=colocate", "buffer.train_batch_size=32", timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert (
        "colocate stalled after explore step 1: the buffer holds 16 experiences, fewer than buffer.train_batch_size=32"
        in proc.stderr
    )
    assert not lines(tmp_path / RUN, "trainer")


@pytest.mark.train
def test_long_prompts_keep_their_end_and_are_counted(short_prompts):
    proc, tmp_path = short_prompts.proc, short_prompts.folder
    assert proc.returncode == 0, proc.stderr[-3000:]
    [explorer] = lines(tmp_path / RUN, "explorer")
    assert explorer["truncated_prompts"] == explorer["experiences"] == 16 and explorer["failed_tasks"] == 0
    experiences = [json.loads(line) for line in (tmp_path / RUN / "arith_experiences.jsonl").read_text().splitlines()]
    assert len(experiences) == 16 and all(len(e["prompt_ids"]) == 3 for e in experiences)
    assert (
        "16 rollouts had their prompt cut to explorer.rollout_model.max_prompt_tokens=3"
        in (tmp_path / RUN / "logs" / "explorer.log").read_text()
    )
    # the engines' own, derived from model's
    assert "    repetition_penalty: 1.2\n" in (tmp_path / RUN / "config.yaml").read_text()


@pytest.mark.train
def test_a_trusted_model_with_its_own_code_trains_and_its_checkpoints_carry_the_code(trusted_code_run):
    assert trusted_code_run.proc.returncode == 0, trusted_code_run.proc.stderr[-3000:]
    checkpoint = trusted_code_run.folder / RUN / "checkpoints" / "global_step_1"
    assert {"configuration_tiny.py", "modeling_tiny.py"} <= set(os.listdir(checkpoint))
    probe = (
        "import sys; from transformers import AutoModelForCausalLM as M; "
        "print(type(M.from_pretrained(sys.argv[1], trust_remote_code=True)).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(checkpoint)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split()[-1] == "TinyForCausalLM", out.stderr[-2000:]


@pytest.mark.train
def test_recomputed_old_logprobs_report_how_far_the_engine_was(hf_every_step):
    assert hf_every_step.proc.returncode == 0, hf_every_step.proc.stderr[-3000:]
    diffs = [r["logprob_diff"] for r in lines(hf_every_step.folder / RUN, "trainer")]  # the bench run adds none
    # both float32 on the CPU: close, not equal (the engine's min_tokens mask)
    assert len(diffs) == 2 and all(0 < d < 0.5 for d in diffs), diffs


@pytest.mark.train
def test_a_second_run_of_a_finished_run_does_nothing_and_says_so(trusted_code_run):
    first = trusted_code_run
    assert first.proc.returncode == 0, first.proc.stderr[-3000:]
    again = trinity(first.env, first.folder, *first.args)
    assert again.returncode == 0 and "done earlier (global_step_1)" in again.stdout, again.stderr[-3000:]
    assert len(lines(first.folder / RUN, "trainer")) == 1


@pytest.mark.train
def test_resume_after_sigterm_continues_from_the_last_checkpoint(env, tmp_path):
    args = (*GRPO_ONLY, "buffer.total_steps=8", "trainer.save_interval=2")
    done = stopped_after_checkpoint(env, tmp_path, *args)
    checkpoints = tmp_path / RUN / "checkpoints"
    lines(tmp_path / RUN)  # every line still parses
    resumed = trinity(env, tmp_path, *args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    steps = [r["step"] for r in lines(tmp_path / RUN, "trainer")]
    assert steps[-(8 - done) :] == list(range(done + 1, 9))  # the second run took over after the checkpoint
    first_after = next(
        r
        for r in lines(tmp_path / RUN, "explorer")
        if r["time"] > os.path.getmtime(checkpoints / f"global_step_{done}" / "state.json") and r["step"] == done + 1
    )
    assert first_after["weight_version"] >= done  # its engines started from the checkpoint's weights
    # save_hf_checkpoint: last (the default) leaves Hugging Face weights only in the last checkpoint, so the resumed
    # engines loaded the stage's model and took the trainer's weights by a sync before their first step
    assert not (checkpoints / f"global_step_{done}" / "model.safetensors").exists()
    # the rewound step, run again
    resumed_first = [r for r in lines(tmp_path / RUN, "explorer") if r["step"] == done + 1][-1]
    resync = [s for s in lines(tmp_path / RUN, "synchronizer") if s["weight_version"] == done]
    assert resync and resync[-1]["time"] < resumed_first["time"] and resumed_first["weight_version"] == done
    assert (checkpoints / "global_step_8" / "state.json").exists() and (
        checkpoints / "global_step_8" / "model.safetensors"
    ).exists()


@pytest.mark.train
def test_explore_and_train_runs_share_experiences_and_weights_through_files(env, tmp_path):
    split = (
        *GRPO_ONLY,
        "buffer.trainer_input.experience_buffer.storage_type=sql",
        "synchronizer.sync_method=checkpoint",
        "buffer.total_steps=2",
    )
    explore = trinity(env, tmp_path, *split, "mode=explore")
    assert explore.returncode == 0, explore.stderr[-3000:]
    run = tmp_path / RUN
    assert [(r["step"], r["weight_version"]) for r in lines(run, "explorer")] == [(1, 0), (2, 0)]
    train = trinity(env, tmp_path, *split, "mode=train")
    assert train.returncode == 0, train.stderr[-3000:]
    assert [r["step"] for r in lines(run, "trainer")] == [1, 2] and all(
        r["experiences"] == 16 for r in lines(run, "trainer")
    )
    assert json.loads((run / "sync" / "published.json").read_text()) == {"version": 2}
    again = trinity(env, tmp_path, *split, "mode=explore", "buffer.total_steps=1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert lines(run, "explorer")[-1]["weight_version"] == 2  # the new explore run took the trained weights
    assert lines(run, "synchronizer")[-1]["method"] == "checkpoint"
