"""One staged `trinity run` of the demo through every algorithm type Trinity-RFT 0.6.0 has that the GRPO runs do
not cover, each stage a few steps with verl as the trainer, each with a KL penalty kind in its reward (so every
kind reaches the trainer). What it runs is listed in tests/config/test_every_value_is_honoured.py."""

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.train, pytest.mark.timeout(900)]

ROOT = (
    "buffer.total_steps=2",
    "buffer.batch_size=2",
    "algorithm.repeat_times=4",
    "trainer.save_interval=0",
    "cluster.ray_address=local",
    "explorer.eval_on_startup=false",
    "buffer.explorer_input.eval_tasksets=[]",
)
# algorithm_type -> (kl_penalty_fn, extra algorithm keys)
ALGORITHMS = {
    "reinforceplusplus": ("k1", {"advantage_fn_args": {"gamma": 0.9}}),
    "rloo": ("k2", {}),
    # upstream's deprecated advantage names (opmd_verl, asymre_verl, grpo_verl) are the same functions
    "opmd": ("k3", {"advantage_fn": "opmd_verl", "advantage_fn_args": {"opmd_baseline": "logavgexp", "tau": 0.5}}),
    "asymre": ("low_var_kl", {"advantage_fn": "asymre_verl"}),
    "topr": ("abs", {}),
    "sapo": ("mse", {"advantage_fn": "grpo_verl", "loss_agg_mode": "seq-mean-token-mean"}),
    "rec": ("corrected_k3", {"advantage_fn_args": {"drop": "balance"}, "policy_loss_fn_args": {"clip_mode": "ring"}}),
    "sppo": ("none", {}),
    "ppo": ("none", {"advantage_fn_args": {"lam": 0.95}}),
}
WARMUP = 2  # the PPO stage's critic_warmup: its first step trains the critic alone
STAGES = [
    {
        "stage_name": name,
        "algorithm": {"algorithm_type": name, "kl_penalty_fn": penalty, **extra},
        **({"trainer": {"critic_warmup": WARMUP}} if name == "ppo" else {}),
    }
    for name, (penalty, extra) in ALGORITHMS.items()
]


def test_every_algorithm_type_trains_the_demo_model(run_env, tmp_path):
    config = yaml.safe_load((REPO / "examples" / "arith" / "arith.yaml").read_text())
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({**config, "stages": STAGES}))
    proc = subprocess.run(
        [sys.executable, "-m", "trinity", "run", "-c", "run.yaml", *ROOT],
        cwd=tmp_path,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    run_dir = tmp_path / "ckpt" / "trinity-demo" / "arith"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["role"] == "trainer"]
    assert {r["stage"] for r in trained} == set(ALGORITHMS), trained
    assert all(r["loss"] is not None and r["grad_norm"] is not None for r in trained if r["stage"] != "ppo")
    ppo = [r for r in trained if r["stage"] == "ppo"]
    assert [r["loss"] is None for r in ppo] == [True, False]  # step 1: the critic alone; step 2: both
    assert all(r["critic_loss"] is not None and r["critic_grad_norm"] is not None for r in ppo)
    assert not any("critic_loss" in r for r in trained if r["stage"] != "ppo")
    last = sorted((run_dir / "checkpoints").iterdir(), key=lambda p: int(p.name.rsplit("_", 1)[1]))[-1]
    assert (last / "critic_state").is_dir() and any((last / "critic_state").iterdir())
    penalised = {r["stage"] for r in trained if "kl_penalty" in r}  # the KL penalty was computed and logged
    assert penalised == {name for name, (penalty, _) in ALGORITHMS.items() if penalty != "none"}, trained
    saved = yaml.safe_load((run_dir / "config.yaml").read_text().split("\n", 1)[1])
    assert [s["algorithm"]["kl_penalty_fn"] for s in saved["stages"]] == [p for p, _ in ALGORITHMS.values()]
