"""One staged `trinity run` of the demo through every algorithm type Trinity-RFT 0.6.0 has that the GRPO runs do
not cover, each stage a few steps with verl as the trainer: the RL ones each with a KL penalty kind in its reward
(so every kind reaches the trainer), PPO with its critic, then DPO and continued pre-training on data sets made
from the demo's problems. What it runs is listed in tests/config/test_every_value_is_honoured.py."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.train, pytest.mark.timeout(1500)]

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


# the algorithms that train on a data set: its rows, and the columns of the demo's problems they come from
DATA_SETS = {
    "dpo": lambda row: {"prompt": row["prompt"], "chosen": row["response"], "rejected": str(int(row["response"]) + 1)},
    "cpt": lambda row: {"text": row["prompt"] + row["response"]},
}


def data_set_stages(demo: Path, folder: Path) -> list[dict]:
    """A train-mode stage per data-set algorithm, its data made from the demo's problems."""
    rows = [json.loads(line) for line in (demo / "data" / "train.jsonl").read_text().splitlines()[:64]]
    stages = []
    for name, make in DATA_SETS.items():
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(make(row)) + "\n" for row in rows))
        fmt = {"prompt_type": "plaintext", **({"prompt_key": "text"} if name == "cpt" else {})}
        storage = {"name": name, "storage_type": "file", "path": str(path), "format": fmt}
        algorithm = {"algorithm_type": name}
        stages.append(
            {
                "stage_name": name,
                "mode": "train",
                "algorithm": algorithm,
                "buffer": {"trainer_input": {"experience_buffer": storage}},
            }
        )
    return stages


def test_every_algorithm_type_trains_the_demo_model(run_env, tmp_path):
    config = yaml.safe_load((REPO / "examples" / "arith" / "arith.yaml").read_text())
    stages = STAGES + data_set_stages(Path(run_env["TRINITY_DEMO_DIR"]), tmp_path)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({**config, "stages": stages}))
    proc = subprocess.run(
        [sys.executable, "-m", "trinity", "run", "-c", "run.yaml", *ROOT],
        cwd=tmp_path,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    run_dir = tmp_path / "ckpt" / "trinity-demo" / "arith"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["role"] == "trainer"]
    assert {r["stage"] for r in trained} == set(ALGORITHMS) | set(DATA_SETS), trained
    assert all(r["loss"] is not None and r["grad_norm"] is not None for r in trained if r["stage"] != "ppo")
    ppo = [r for r in trained if r["stage"] == "ppo"]
    assert [r["loss"] is None for r in ppo] == [True, False]  # step 1: the critic alone; step 2: both
    assert all(r["critic_loss"] is not None and r["critic_grad_norm"] is not None for r in ppo)
    assert not any("critic_loss" in r for r in trained if r["stage"] != "ppo")
    ppo_end = run_dir / "checkpoints" / f"global_step_{ppo[-1]['step']}"  # the PPO stage's last checkpoint
    assert (ppo_end / "critic_state").is_dir() and any((ppo_end / "critic_state").iterdir())
    assert not (run_dir / "checkpoints" / f"global_step_{ppo[0]['step'] - 1}" / "critic_state").exists()
    penalised = {r["stage"] for r in trained if "kl_penalty" in r}  # the KL penalty was computed and logged
    assert penalised == {name for name, (penalty, _) in ALGORITHMS.items() if penalty != "none"}, trained
    saved = yaml.safe_load((run_dir / "config.yaml").read_text().split("\n", 1)[1])
    assert [s["algorithm"]["kl_penalty_fn"] for s in saved["stages"][: len(ALGORITHMS)]] == [
        p for p, _ in ALGORITHMS.values()
    ]
    dpo = [r for r in trained if r["stage"] == "dpo"]
    assert dpo[0]["loss"] == pytest.approx(math.log(2) + 0.0, abs=0.02)  # the policy starts as its reference: z = 0
