"""One staged `trinity run` of the demo through every algorithm type Trinity-RFT 0.6.0 has that the GRPO runs do
not cover, each stage a few steps with verl as the trainer: the RL ones each with a KL penalty kind in its reward
(so every kind reaches the trainer), PPO with its critic, ReMax with its greedy rollouts, RAFT, distillation from a
teacher, SFT samples mixed into RL batches (with dynamic sampling), the sample strategies, then DPO and continued
pre-training on data sets made from the demo's problems. What it runs is listed in
tests/config/test_every_value_is_honoured.py."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.cli.test_run import summary_column
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
    # ReMax (upstream lists its advantage, no preset): the explorer adds a greedy rollout of each task
    "remax": ("none", {"algorithm_type": "grpo", "advantage_fn": "remax"}),
    # upstream's deprecated advantage names (opmd_verl, asymre_verl, grpo_verl) are the same functions
    "opmd": ("k3", {"advantage_fn": "opmd_verl", "advantage_fn_args": {"opmd_baseline": "logavgexp", "tau": 0.5}}),
    "asymre": ("low_var_kl", {"advantage_fn": "asymre_verl"}),
    "topr": ("abs", {"sample_strategy": "warmup"}),  # upstream's deprecated name of default
    "sapo": (
        "mse",
        {
            "advantage_fn": "grpo_verl",
            "loss_agg_mode": "seq-mean-token-mean",
            "sample_strategy": "staleness_control",  # on-policy: nothing is too old
            "sample_strategy_args": {"max_staleness": 0},
        },
    ),
    "rec": ("corrected_k3", {"advantage_fn_args": {"drop": "balance"}, "policy_loss_fn_args": {"clip_mode": "ring"}}),
    "sppo": ("none", {}),
    "ppo": ("none", {"advantage_fn_args": {"lam": 0.95}}),
    "raft": ("none", {"policy_loss_fn": "sft_is"}),  # the SFT loss reads no rewards to penalise
    # distillation, the demo's untrained model as the teacher; on_policy_distill with upstream's unclipped loss
    "on_policy_distill": ("none", {"policy_loss_fn": "importance_sampling"}),
    "jsd": ("none", {"advantage_fn_args": {"lambda_coef": 0.3}}),
    # SFT samples of the demo's problems in every batch; mix with DAPO's dynamic sampling
    "mix": ("none", {"advantage_fn_args": {"std_threshold": 0.0, "duplicate_experiences": True}}),
    "mix_chord": (
        "none",
        {"policy_loss_fn_args": {"mu_warmup_steps": 2}, "sample_strategy_args": {"sft_dataset_name": "expert"}},
    ),
}
TEACHER = "${oc.env:TRINITY_DEMO_DIR}/model"
WARMUP = 2  # the PPO stage's critic_warmup: its first step trains the critic alone


def stage(name: str, penalty: str, extra: dict, folder: Path) -> dict:
    """The stage running algorithm `name` with a KL penalty kind in its reward; its teacher or SFT samples where it
    reads them (write_data's, in messages format for mix_chord)."""
    out = {"stage_name": name, "algorithm": {"algorithm_type": name, "kl_penalty_fn": penalty, **extra}}
    if name == "ppo":
        out["trainer"] = {"critic_warmup": WARMUP}
    if name in ("on_policy_distill", "jsd"):
        out["model"] = {"teacher_model_path": TEACHER}
    if name in ("mix", "mix_chord"):
        fmt = {"prompt_type": "plaintext"}
        if name == "mix_chord":
            fmt = {"prompt_type": "messages", "messages_key": "messages"}
        data_set = {"path": str(folder / f"sft_{fmt['prompt_type']}.jsonl"), "format": fmt}
        named = "expert" if name == "mix_chord" else "sft_dataset"
        out["buffer"] = {"trainer_input": {"auxiliary_buffers": {named: data_set}}}
    return out


# the data sets made from the demo's problems: the two data-set algorithms' (a stage each), and the SFT samples that
# mix and mix_chord put in their batches, in plaintext and messages format
DATA = {
    "dpo": lambda row: {"prompt": row["prompt"], "chosen": row["response"], "rejected": str(int(row["response"]) + 1)},
    "cpt": lambda row: {"text": row["prompt"] + row["response"]},
    "sft_plaintext": lambda row: {"prompt": row["prompt"], "response": row["response"]},
    "sft_messages": lambda row: {
        "messages": [{"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": row["response"]}]
    },
}
DATA_SETS = {"dpo": {}, "cpt": {"policy_loss_fn": "sft_phi"}}  # algorithm -> its stage's algorithm keys


def write_data(demo: Path, folder: Path) -> None:
    """Each of DATA as `folder/<name>.jsonl`, from the demo's first 64 training problems."""
    rows = [json.loads(line) for line in (demo / "data" / "train.jsonl").read_text().splitlines()[:64]]
    for name, make in DATA.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(make(row)) + "\n" for row in rows))


def data_set_stages(folder: Path) -> list[dict]:
    """A train-mode stage per data-set algorithm."""
    stages = []
    for name, extra in DATA_SETS.items():
        fmt = {"prompt_type": "plaintext", **({"prompt_key": "text"} if name == "cpt" else {})}
        storage = {"name": name, "storage_type": "file", "path": str(folder / f"{name}.jsonl"), "format": fmt}
        stages.append(
            {
                "stage_name": name,
                "mode": "train",
                "algorithm": {"algorithm_type": name, **extra},
                "buffer": {"trainer_input": {"experience_buffer": storage}},
            }
        )
    return stages


def test_every_algorithm_type_trains_the_demo_model(run_env, tmp_path):
    config = yaml.safe_load((REPO / "examples" / "arith" / "arith.yaml").read_text())
    write_data(Path(run_env["TRINITY_DEMO_DIR"]), tmp_path)
    stages = [stage(name, penalty, extra, tmp_path) for name, (penalty, extra) in ALGORITHMS.items()]
    stages += data_set_stages(tmp_path)
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
    # every stage runs in the processes of the one before where its plan is the same: the RL stages keep all 4
    # actors; the data-set stages train on the RL stages' trainer slot (the cpu profile's train_stage_devices), so
    # the first keeps the trainer rank and the buffer
    kept = {name: v for name, v in summary_column(proc.stdout, "KEPT").items() if name in {*ALGORITHMS, *DATA_SETS}}
    assert kept == {name: "0/4" if i == 0 else "4/4" for i, name in enumerate(ALGORITHMS)} | {
        "dpo": "2/2",
        "cpt": "2/2",
    }
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
    assert [r["selected"] for r in trained if r["stage"] == "raft"] == [2, 2]  # each task's best of its 4 rollouts
    taught = [r for r in trained if r["stage"] in ("on_policy_distill", "jsd")]
    assert len(taught) == 4 and all(math.isfinite(r["teacher_kl"]) for r in taught)
    assert not any("teacher_kl" in r for r in trained if r not in taught)
    mixed = [r for r in trained if r["stage"] in ("mix", "mix_chord")]
    assert [r["mixed_samples"] for r in mixed] == [8] * 4  # 2 tasks x 4 rollouts and as many SFT samples
    # mix drops the groups whose 4 rewards agree and refills with copies of the others: 8 rollouts, or none when
    # both agree (then the step trains the samples alone)
    assert [r["experiences"] for r in mixed] == [16 if r.get("filtered_groups", 0) < 2 else 8 for r in mixed]
    assert all("filtered_groups" in r for r in mixed if r["stage"] == "mix")
    assert [r["stale_dropped"] for r in trained if r["stage"] == "sapo"] == [0, 0]
    assert "algorithm.sample_strategy: 'warmup' is Trinity-RFT's deprecated name of 'default'" in proc.stderr
    dpo = [r for r in trained if r["stage"] == "dpo"]
    assert dpo[0]["loss"] == pytest.approx(math.log(2) + 0.0, abs=0.02)  # the policy starts as its reference: z = 0
