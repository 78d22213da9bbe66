"""One staged `trinity run` of the demo through the values no other end-to-end test runs: each stage a few
steps with other sync styles, optimizers, loss aggregations, KL losses, algorithms, dtypes and checkpoint
kinds, a math_workflow taskset, chat-message prompts, a wandb monitor (offline) and Ray's timeline. What it runs
is listed in tests/config/test_every_value_is_honoured.py, which names this test."""

import json
import subprocess
import sys

import pytest
import yaml

from tests.cli.test_run import summary_column
from tests.conftest import REPO
from tests.session_ray import own_ray

pytest.importorskip("verl")
pytest.importorskip("ray")
pytest.importorskip("wandb")

pytestmark = [pytest.mark.ray, pytest.mark.train]

ROOT = (
    "buffer.total_steps=2",
    "buffer.batch_size=2",
    "algorithm.repeat_times=2",
    "trainer.save_interval=0",
    "cluster.ray_address=local",
    "explorer.eval_on_startup=false",
    "monitor.monitor_type=wandb",
    "monitor.enable_ray_timeline=true",
    "cluster.train_stage_devices=all",  # SFT on both slots: the next stage starts its own trainer rank
    "buffer.explorer_input.eval_tasksets.0.format.prompt_type=messages",  # the rows' prompt column as one user message
)
STAGES = [
    {
        "stage_name": "sft_messages",
        "mode": "train",
        "algorithm": {"algorithm_type": "sft"},
        "buffer": {
            "total_steps": 2,
            "train_batch_size": 4,
            "trainer_input": {
                "experience_buffer": {
                    "name": "sft",
                    "storage_type": "file",
                    "path": "${oc.env:TRINITY_DEMO_DIR}/data",
                    "format": {"prompt_type": "messages", "prompt_key": "prompt", "response_key": "response"},
                }
            },
        },
    },
    {
        "stage_name": "gspo_sgd_trainer_driven",
        "algorithm": {
            "algorithm_type": "gspo",
            "loss_agg_mode": "seq-mean-token-sum",
            "kl_loss_fn": "k1",
            "optimizer": {"optimizer_type": "sgd"},
        },
        "synchronizer": {"sync_style": "trainer_driven"},
        "trainer": {"save_hf_checkpoint": "always"},
        "buffer": {"explorer_input": {"default_reward_fn_type": "exact_match"}},
    },
    {
        "stage_name": "cispo_adamw_explorer_driven_fp32",
        "algorithm": {
            "algorithm_type": "cispo",
            "loss_agg_mode": "seq-mean-token-mean",
            "kl_loss_fn": "k3",
            "optimizer": {"optimizer_type": "adamw"},
        },
        "synchronizer": {"sync_style": "explorer_driven", "sync_method": "offline"},
        "explorer": {"rollout_model": {"dtype": "float32"}},
        "trainer": {"param_dtype": "float32"},
    },
    {
        "stage_name": "dapo_math",
        "algorithm": {"algorithm_type": "dapo", "loss_agg_mode": "seq-mean-token-sum-norm", "kl_loss_fn": "abs"},
        "buffer": {
            "explorer_input": {"default_workflow_type": "math_workflow", "default_reward_fn_type": "math_reward"}
        },
    },
    {"stage_name": "grpo_verl_k2", "algorithm": {"algorithm_type": "grpo_verl", "kl_loss_fn": "k2"}},
    {
        "stage_name": "grpo_mse_no_hf",
        "algorithm": {"algorithm_type": "grpo", "kl_loss_fn": "mse"},
        "trainer": {"save_hf_checkpoint": "never"},
    },
]


@pytest.fixture
def env(run_env, tmp_path):
    """A Ray of the run's own, as many CPUs as this machine has: what a stage keeps for the next one (KEPT) is what that
    Ray has room for beside it."""
    wandb = {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path / "wandb"), "WANDB_SILENT": "true"}
    return {**own_ray(run_env), **wandb}


def test_a_staged_run_through_the_values_no_other_run_takes(env, tmp_path):
    (tmp_path / "wandb").mkdir()
    config = yaml.safe_load((REPO / "examples" / "arith" / "arith.yaml").read_text())
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({**config, "stages": STAGES}))
    proc = subprocess.run(
        [sys.executable, "-m", "trinity", "run", "-c", "run.yaml", *ROOT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    run_dir = tmp_path / "ckpt" / "trinity-demo" / "arith"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = {(r["stage"], r["step"]) for r in records if r["role"] == "trainer"}
    assert {s["stage_name"] for s in STAGES} == {stage for stage, _ in trained}, trained
    kept = {name: v for name, v in summary_column(proc.stdout, "KEPT").items() if name.startswith(("sft_", "gspo_"))}
    assert kept == {"sft_messages": "0/3", "gspo_sgd_trainer_driven": "1/4"}  # 2 ranks; then the buffer only
    synced = {r["stage"] for r in records if r["role"] == "synchronizer"}
    assert {s["stage_name"] for s in STAGES[1:]} <= synced  # every RL stage moved weights to the engine
    assert list((tmp_path / "wandb").rglob("*.wandb")), "the wandb monitor wrote nothing"
    events = json.loads((run_dir / "ray_timeline.json").read_text())  # monitor.enable_ray_timeline
    assert {"train_step", "explore_step"} <= {e["name"] for e in events}
