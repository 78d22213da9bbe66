"""Five of the corpus configs (tests/upstream_examples/) run as their users run them, `trinity run -c <config>`, on
this machine's CPU profile, with tiny stand-in models and data under the hub names the configs give (`run_cache` in
conftest.py, read offline from huggingface_hub's cache): GRPO and RLOO on GSM8K, GRPO judged by an LLM judge (a stand-in
on loopback at $OPENAI_BASE_URL), the TuFT example's multi-turn ALFWorld agent on trinity's engine and trainer, and
M2PO's explorer run and trainer run sharing experiences through SQLite. Each run's keys and values stay as written;
the overrides below only make it small enough for two cores (each says why), and each run is one or two steps.

FrozenLake with its judge (frozen_lake_judge.yaml) runs too, its verl passthrough's keys that are trinity's settings
(param_offload, use_remove_padding, ...) set as those (trinity/config/derive/trainer.py VERL_TWINS); M2PO's trainer
run, given no step count, trains on every experience its explorer run left (trinity/config/modes.py
trains_until_drained)."""

import json
import re
import sqlite3
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.runtime.rewards.judge_standin import judge_standin
from tests.session_ray import own_ray
from tests.upstream_examples.conftest import HERE, jsonl
from tests.upstream_examples.test_corpus import READS

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.train]

# Every run: the CPU profile, and a Ray of its own (the configs join a running cluster, or name none).
CPU = ("hardware=cpu", "cluster.ray_address=local")
# The demo's model as Qwen/Qwen2.5-1.5B-Instruct holds 32 positions: a prompt like "12+34=" and a 4-token answer.
DEMO_SIZED = ("model.max_model_len=16", "model.max_response_tokens=4")
# GSM8K's 96 tasks a step, 2 here: the cache's four training problems are two steps (total_epochs 1, as written).
GSM8K = (*CPU, *DEMO_SIZED, "buffer.batch_size=2")
NCCL_ON_CPU = "'nccl' is not the collective backend of cpu, which is 'gloo'"  # the configs name NVIDIA's collective
JUDGE_KEY = "sk-corpus-judge"


def run(env: dict, cwd: Path, config: str, *overrides: str, timeout: float = 600) -> SimpleNamespace:
    """`trinity run -c <corpus config> OVERRIDES...`; its process, its run directory and the seconds it took."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "trinity", "run", "-c", str(HERE / f"{config}.yaml"), *overrides],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.monotonic() - started
    print(f"{config}: trinity run took {seconds:.1f} s")  # shown with -s; the test's own time is in --durations
    saved = yaml.safe_load((HERE / f"{config}.yaml").read_text())
    name = re.sub(r"\$\{oc\.env:(\w+)\}", lambda m: env[m.group(1)], saved["name"])
    run_dir = Path(env["TRINITY_CHECKPOINT_ROOT_DIR"]) / saved["project"] / name
    return SimpleNamespace(proc=proc, dir=run_dir, seconds=seconds)


def records(run_dir: Path, role: str) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["role"] == role]


def saved_config(run_dir: Path) -> dict:
    return yaml.safe_load(re.sub(r"^# sha256: .*\n", "", (run_dir / "config.yaml").read_text()))


def consumed(db_file: Path) -> dict:
    """How many experiences of a run's SQLite store each train step took (None: none took them)."""
    with sqlite3.connect(db_file) as db:
        return dict(db.execute("SELECT consumed_step, COUNT(*) FROM experiences GROUP BY consumed_step").fetchall())


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The working folder the runs start from: the local data their configs name."""
    folder = tmp_path_factory.mktemp("runs")
    # FrozenLake's tasks as upstream's examples/grpo_frozen_lake/get_frozen_lake_data.py writes them: a lake a row
    lakes = folder / "data" / "frozenlake"
    lakes.mkdir(parents=True)
    for split, seed in (("train", 7), ("test", 11)):
        (lakes / f"{split}.jsonl").write_text(
            jsonl({"seed": seed, "size": 4, "p": 0.8, "index": 0, "uid": f"{seed}_4_0.8"})
        )
    return folder


@pytest.fixture(scope="module")
def env_of(shared_run_env, run_cache):
    """The environment of one run, checkpoints under `folder`: the stand-ins' hub cache, offline; of the variables
    the corpus configs read, only those given."""

    def make(folder: Path, **given: str) -> dict:
        env = shared_run_env(folder)  # checkpoints (TRINITY_CHECKPOINT_ROOT_DIR) under `folder`
        env = {k: v for k, v in env.items() if k not in READS or k == "TRINITY_CHECKPOINT_ROOT_DIR"}
        return env | {"HF_HOME": str(run_cache), "HF_HUB_OFFLINE": "1"} | given

    return make


def assert_fetched(run_dir: Path, cache: Path, *names: str) -> None:
    """The run read each hub name from the cache (offline), at the commit the cache's main points to."""
    fetched = {f["name"]: f for f in saved_config(run_dir)["fetched"]}
    assert sorted(fetched) == sorted(names)
    for name, record in fetched.items():
        refs = cache / "hub" / "--".join((f"{record['repo_type']}s", *name.split("/"))) / "refs" / "main"
        assert (record["source"], record["commit"]) == ("the hub cache", refs.read_text()), record


def assert_gsm8k_run(result: SimpleNamespace, cache: Path, algorithm: str) -> None:
    """Two GRPO-family steps of 2 tasks x 8 rollouts on the engine, trained, synced over gloo, evaluated before and
    after on gsm8k-eval; the queue also kept in the run's SQLite file (path: sqlite:///gsm8k.db)."""
    assert result.proc.returncode == 0, result.proc.stderr[-4000:]
    assert NCCL_ON_CPU in result.proc.stderr
    explored = records(result.dir, "explorer")
    assert [(r["step"], r["experiences"], r["weight_version"]) for r in explored] == [(1, 16, 0), (2, 16, 1)]
    trained = records(result.dir, "trainer")
    assert [(r["step"], r["experiences"]) for r in trained] == [(1, 16), (2, 16)]
    assert all(r["loss"] is not None and r["lr"] == 1e-05 for r in trained)
    assert [(r["method"], r["weight_version"]) for r in records(result.dir, "synchronizer")] == [
        ("gloo", 1),
        ("gloo", 2),
    ]
    assert [(r["step"], r["taskset"], r["tasks"]) for r in records(result.dir, "eval")] == [
        (0, "gsm8k-eval", 2),
        (2, "gsm8k-eval", 2),
    ]
    assert consumed(result.dir / "gsm8k.db") == {1: 16, 2: 16}  # each experience trained once, in its step
    config = saved_config(result.dir)
    assert config["algorithm"]["algorithm_type"] == algorithm
    assert_fetched(result.dir, cache, "Qwen/Qwen2.5-1.5B-Instruct", "openai/gsm8k")


def test_grpo_on_gsm8k(env_of, run_cache, site, tmp_path):
    result = run(env_of(tmp_path), site, "gsm8k_grpo", *GSM8K)
    assert_gsm8k_run(result, run_cache, "grpo")
    assert saved_config(result.dir)["algorithm"]["advantage_fn"] == "grpo"


def test_rloo_on_gsm8k(env_of, run_cache, site, tmp_path):
    result = run(env_of(tmp_path), site, "rloo_gsm8k", *GSM8K)
    assert_gsm8k_run(result, run_cache, "rloo")
    assert saved_config(result.dir)["algorithm"]["advantage_fn"] == "rloo"  # RLOO's leave-one-out baseline


GRADES: list[int] = []  # the judge stand-in's grades, in the order it gave them


def grade(request: dict) -> str:
    """The judge stand-in's rubric for the conversation it is shown: 3 for the right sum, 2 for another number, 1 for
    anything else (JSON, as trajectory_accuracy_grader_reward asks)."""
    shown = request["messages"][-1]["content"]
    found = re.search(r"<trajectory>\n\[user\] (\S+)\n\n\[assistant\] ?(.*?)\n</trajectory>", shown, re.S)
    question, reply = found.groups()
    a, b = question.rstrip("=").split("+")
    score = 3 if reply == str(int(a) + int(b)) else 2 if reply.isdigit() else 1
    GRADES.append(score)
    return json.dumps({"reason": "graded by the stand-in", "score": score})


def test_grpo_on_gsm8k_with_an_llm_judge(env_of, site, tmp_path):
    """Every rollout, trained or evaluated, judged once by the model the config names (qwen3-max: its default) at the
    endpoint and with the key the variables it names hold; the grade, normalised, added to the reward."""
    GRADES.clear()
    with judge_standin(grade) as (url, seen):
        env = own_ray(env_of(tmp_path, OPENAI_BASE_URL=url, OPENAI_API_KEY=JUDGE_KEY))  # read by the judging role
        result = run(env, site, "gsm8k_judge_grpo", *GSM8K)
    assert result.proc.returncode == 0, result.proc.stderr[-4000:]
    explored, evals = records(result.dir, "explorer"), records(result.dir, "eval")
    assert [r["experiences"] for r in explored] == [16, 16] and [r["tasks"] for r in evals] == [2, 2]
    assert len(seen) == 16 + 16 + 2 + 2
    assert {(r["path"], r["model"], r["auth"]) for r in seen} == {
        ("/v1/chat/completions", "qwen3-max", f"Bearer {JUDGE_KEY}")
    }
    grades = list(GRADES)
    assert len(set(grades)) > 1  # the untrained model's answers differ, and so do their grades
    # the explorer's and the evaluations' mean grades are the judge's (each grade once)
    counted = [(r["trajectory_score_mean"], r["experiences"]) for r in explored]
    counted += [(r["trajectory_score_mean"], r["tasks"]) for r in evals]
    assert sum(mean * n for mean, n in counted) == pytest.approx(sum(grades))
    for r in explored:  # the reward: the grade plus its normalised value, (grade - score_min) / (score_max - score_min)
        assert r["reward_mean"] == pytest.approx(r["trajectory_score_mean"] * 1.5 - 0.5)
    trained = records(result.dir, "trainer")
    assert [r["experiences"] for r in trained] == [16, 16] and any(r["loss"] != 0 for r in trained)


@pytest.fixture(scope="module")
def alfworld_game(site) -> Path:
    """A game of ALFWorld's data set, tiny (put the apple in the fridge: the one in tests/runtime/workflows/
    test_alfworld.py), under $ALFWORLD_DATA as ALFWorld lays its games out, and the taskset that names it."""
    pytest.importorskip("alfworld", reason="step_wise_alfworld_workflow needs trinity[alfworld]")
    pytest.importorskip("textworld", reason="step_wise_alfworld_workflow needs trinity[alfworld]")
    from tests.runtime.workflows.test_alfworld import PROBLEM

    data = resources.files("alfworld") / "data"
    grammar = (data / "alfred.twl2").read_text().replace("UNKNOWN GOAL", "put some apple in fridge")
    game = site / "alfworld" / "json_2.1.1" / "train" / "pick_apple_then_place_in_recep-1" / "trial_1" / "game.tw-pddl"
    game.parent.mkdir(parents=True)
    body = {"pddl_domain": (data / "alfred.pddl").read_text(), "grammar": grammar, "pddl_problem": PROBLEM}
    game.write_text(json.dumps(body | {"solvable": True}))
    tasks = site / "examples" / "grpo_alfworld" / "alfworld_data"
    tasks.mkdir(parents=True)
    for split in ("train", "test"):
        (tasks / f"{split}.jsonl").write_text(jsonl({"game_file": str(game)}))
    return game


def test_the_tuft_alfworld_agent_on_trinitys_engine_and_trainer(env_of, run_cache, site, alfworld_game, tmp_path):
    """alfworld_lora32_speed.yaml, the smallest step: one game played once, its 30 turns each an experience
    (max_env_steps 30, one engine call a turn), 4 of them trained with the rank-32 LoRA, the adapter handed to the
    engine by memory; the step's best and worst rollouts previewed; staleness control dropped none."""
    env = own_ray(  # the games' folder (ALFWORLD_DATA) is read by the role that plays: a Ray of the run's own
        env_of(
            tmp_path,
            TRINITY_MACHINE_ID="cpu0",
            ALFWORLD_DATA=str(site / "alfworld"),
            TRINITY_RAY_ADDRESS="local",  # the variable the config reads its cluster from
        )
    )
    result = run(
        env,
        site,
        "alfworld_lora32_speed",
        "hardware=cpu",
        # gpu_per_node 0 takes the profile's devices per node: 8 on the CPU profile, 7 trainer ranks on two cores
        "cluster.gpu_per_node=2",
        # the smallest batch: 16 tasks x 16 rollouts a step, one here (two games at once fail today: TextWorld's game
        # parser is not thread-safe and the explorer's runners are threads, a trinity bug); replies of 8 tokens, not 512
        "buffer.batch_size=1",
        "algorithm.repeat_times=1",
        "model.max_response_tokens=8",
        # a train step of 7680 experiences, 4 here (a step of a prompt of ~2000 tokens each, seconds on the CPU);
        # one step of 250
        "buffer.train_batch_size=4",
        "trainer.total_steps=1",
    )
    assert result.proc.returncode == 0, result.proc.stderr[-4000:]
    assert result.dir.name == "Step_Wise_Alfworld_TuFT_lora32_lr5e5_speed_cpu0"  # $TRINITY_MACHINE_ID in the name
    # explorer.env_vars reach the engine's environment: the game files' folder, the temporary folder
    assert re.search(rf"rollout: .*TMPDIR=\S+ ALFWORLD_DATA={re.escape(str(site / 'alfworld'))}", result.proc.stderr)
    [explored] = records(result.dir, "explorer")
    assert (explored["experiences"], explored["engine_calls"], explored["actual_env_steps_mean"]) == (30, 30, 30.0)
    assert explored["reward_mean"] == pytest.approx(-0.1)  # out of turns: upstream's -0.1 on every step
    [trained] = records(result.dir, "trainer")
    assert trained["experiences"] == 4 and trained["stale_dropped"] == 0 and trained["lr"] == 5e-05
    [preview] = records(result.dir, "preview")  # trainer.enable_preview
    assert preview["table"] == "rollout_examples" and len(preview["rows"]) == 2
    assert [(r["method"], r["weight_version"]) for r in records(result.dir, "synchronizer")] == [("memory", 1)]
    adapter = json.loads((result.dir / "checkpoints" / "global_step_1" / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"]) == (32, 32)
    assert (result.dir / "logs" / "explorer.log").exists() and list((result.dir / "tensorboard").iterdir())
    assert_fetched(result.dir, run_cache, "Qwen/Qwen3-1.7B")


# M2PO's explorer run, then its trainer run, in one run directory: 2 tasks x 8 rollouts a step instead of 32 x 8, so
# the trainer's batch (256: one explore step's experiences) is 16; one device each instead of four (one engine).
M2PO_EXPLORE = (
    *CPU,
    *DEMO_SIZED,
    "cluster.gpu_per_node=1",
    "explorer.rollout_model.engine_num=1",
    "buffer.batch_size=2",
)
M2PO_TRAIN = (
    *CPU,
    *DEMO_SIZED,
    "cluster.gpu_per_node=1",
    "buffer.train_batch_size=16",
    # with no step count it trains until no batch comes within this: the explorer run is over, its experiences all
    # there (upstream's default, 1800 s, waits for a live one)
    "buffer.trainer_input.experience_buffer.max_read_timeout=3",
)


@pytest.fixture(scope="module")
def m2po_pair(env_of, site, tmp_path_factory):
    env = env_of(tmp_path_factory.mktemp("m2po"))
    explorer = run(env, site, "m2po_gsm8k_explorer", *M2PO_EXPLORE)
    trainer = run(env, site, "m2po_gsm8k_trainer", *M2PO_TRAIN) if explorer.proc.returncode == 0 else None
    return SimpleNamespace(explorer=explorer, trainer=trainer)


def test_m2pos_explorer_run_and_trainer_run_share_experiences_through_sqlite(m2po_pair):
    explorer, trainer = m2po_pair.explorer, m2po_pair.trainer
    assert explorer.proc.returncode == 0, explorer.proc.stderr[-4000:]
    assert trainer.proc.returncode == 0, trainer.proc.stderr[-4000:]
    assert trainer.dir == explorer.dir  # one run directory: project, name and checkpoint_root_dir are the same
    assert [(r["step"], r["experiences"]) for r in records(explorer.dir, "explorer")] == [(1, 16), (2, 16)]
    trained = records(trainer.dir, "trainer")
    assert trained and all(r["experiences"] == 16 and r["lr"] == 1e-06 for r in trained)
    taken = consumed(explorer.dir / "m2po_gsm8k.db")  # the explorer run's 32, each train step's 16 of them
    assert sum(taken.values()) == 32 and {s: n for s, n in taken.items() if s} == {r["step"]: 16 for r in trained}
    # M2PO's own metrics: the batch's second moment of log-ratios, before and after its mask
    assert {"m2po_m2_before", "m2po_m2_after", "m2po_masked_fraction"} <= set(trained[0])
    assert (trainer.dir / "checkpoints" / f"global_step_{len(trained)}" / "model.safetensors").exists()


def test_m2pos_trainer_run_trains_on_every_experience_its_explorer_run_left(m2po_pair):
    """No step count in mode train: it trains until the experiences stop coming, as upstream's trainer
    (trainer.total_steps unset: float('inf')), and says so."""
    assert m2po_pair.trainer.proc.returncode == 0
    assert (
        "no experiences for 3 s (max_read_timeout) before train step 3: the run ends after 2 train steps"
        in m2po_pair.trainer.proc.stderr
    )
    assert [r["experiences"] for r in records(m2po_pair.trainer.dir, "trainer")] == [16, 16]
    assert consumed(m2po_pair.trainer.dir / "m2po_gsm8k.db") == {1: 16, 2: 16}


def test_the_frozen_lake_agent_judged_by_an_llm(env_of, site, tmp_path):
    """frozen_lake_judge.yaml on upstream's FrozenLake tasks: one lake, two episodes of up to 10 turns, each judged
    once (its grade replacing the lake's reward); the evaluations (4 episodes of the test lake) take the lake's own."""
    with judge_standin(lambda request: json.dumps({"reason": "stand-in", "score": 2})) as (url, seen):
        env = own_ray(  # the judge's variables are read by the role that judges: a Ray of the run's own
            env_of(tmp_path, TRINITY_TASKSET_PATH="data/frozenlake", OPENAI_BASE_URL=url, OPENAI_API_KEY=JUDGE_KEY)
        )
        result = run(
            env,
            site,
            "frozen_lake_judge",
            *CPU,
            # one engine of six, one trainer rank; one lake of 64 a step, two episodes of 8; replies of 8 tokens in a
            # context of 3000 (the character model's 8192 positions hold it)
            "cluster.gpu_per_node=2",
            "explorer.rollout_model.engine_num=1",
            "buffer.batch_size=1",
            "algorithm.repeat_times=2",
            "model.max_response_tokens=8",
            "model.max_model_len=3000",
        )
    assert result.proc.returncode == 0, result.proc.stderr[-4000:]
    [explored] = records(result.dir, "explorer")
    assert explored["experiences"] == 2 and len(seen) == 2  # the training episodes judged, the evaluations not
    assert explored["reward_mean"] == pytest.approx(0.5)  # grade 2 of 1..3, normalised
    assert [r["tasks"] for r in records(result.dir, "eval")] == [1, 1]
    assert [r["experiences"] for r in records(result.dir, "trainer")] == [2]
