"""The trainer resumes itself (issue 49, parts 2 and 4): `kill -9` of a trainer rank or the buffer at a drawn step of
a real `trinity run` restarts the stage from its last complete checkpoint by itself, and the run finishes as an
uninterrupted one does; the restart is in metrics.jsonl, on stderr and in the summary. One budget serves every kind
of restart (the stage's and an engine's replacement); a spent one ends the run with the cause and says so; an engine
not replaced in place (colocate) restarts its stage; SIGTERM after a restart still exits 143 and leaves no process of
the run's Ray.

The kill lands after a step drawn per role (seeded: TRINITY_RESTART_SEED=n tries others). TRINITY_RESTART_FULL=1 runs
the whole demo (SFT, then GRPO with trainer.save_interval=20, the kill in GRPO) where held-out accuracy means
something (about 3 minutes a run here); the default is the shortened GRPO-only demo.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_run import GRPO_ONLY, RUN, lines, shared_run
from tests.cli.test_run_blame import role_pid
from tests.session_ray import own_ray

SEED = int(os.environ.get("TRINITY_RESTART_SEED", "0"))
FULL = os.environ.get("TRINITY_RESTART_FULL") == "1"
KILLED = {"trainer_node0.rank0": "TrainerRank", "buffer": "ExperienceBuffer"}  # role -> its actor's class
# the buffer's run keeps its experiences in SQLite (buffer/scope.py: what the restart gives back and drops)
SQL = "buffer.trainer_input.experience_buffer.storage_type=sql"
STORED = {"buffer": (SQL,)}  # role -> the killed run's own settings
# the shortened demo: 6 GRPO steps, a checkpoint every 2; or the whole demo, a checkpoint every 20 GRPO steps
ARGS = ("trainer.save_interval=20",) if FULL else (*GRPO_ONLY, "buffer.total_steps=6", "trainer.save_interval=2")
STAGE, STEPS = ("grpo", 100) if FULL else (None, 6)  # the stage killed, and its steps
TIMEOUT_S = 900 if FULL else 400
# a run, a restart and (for the first test) the uninterrupted run beside it, on 2 busy cores
pytestmark = [pytest.mark.ray, pytest.mark.train, pytest.mark.timeout(2 * TIMEOUT_S)]


def started(env: dict, cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        # --timeout: actors that start slowly on 2 busy cores are not a failure of the run
        [sys.executable, "-m", "trinity", "run", *ARGS, *args, "--format", "json", "--timeout", "300"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def trained(run: Path) -> list[dict]:
    """The trainer's lines of the stage killed, as far as the run has written them."""
    return [r for r in lines(run, "trainer") if r["stage"] == STAGE] if (run / "metrics.jsonl").exists() else []


def reached(proc: subprocess.Popen, cwd: Path, step: int, restarts: int = 0) -> None:
    """Wait until the stage has trained `step` steps since its `restarts`-th restart (0: since the run began)."""
    run, deadline = cwd / RUN, time.monotonic() + TIMEOUT_S
    while True:
        if (run / "metrics.jsonl").exists() and len(lines(run, "restart")) >= restarts:
            since = lines(run, "restart")[restarts - 1]["time"] if restarts else 0.0
            if len([r for r in trained(run) if r["time"] > since]) >= step:
                return
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "no step"
        time.sleep(0.05)


def kill(env: dict, role: str, pid: int | None = None) -> float:
    """SIGKILL the run's `role` (or process `pid`); when (seconds since the epoch, as metrics.jsonl's times)."""
    os.kill(pid or role_pid(KILLED[role], Path(env["TRINITY_CHECKPOINT_ROOT_DIR"])), signal.SIGKILL)
    return time.time()


def assert_nothing_half_written(run: Path) -> None:
    checkpoints = run / "checkpoints"
    if not checkpoints.exists():  # stopped before the first checkpoint
        return
    assert not [p for p in os.listdir(checkpoints) if p.startswith(".")]
    assert all((c / "state.json").exists() for c in checkpoints.iterdir())
    text = (run / "metrics.jsonl").read_text()
    assert not text or text.endswith("\n")  # the run has ended: its last line is whole
    lines(run)  # and every line parses


@pytest.fixture(scope="module")
def uninterrupted(shared_run_env, tmp_path_factory):
    """The same run, never killed: what a restarted one is compared with."""
    run = shared_run(shared_run_env, tmp_path_factory, "uninterrupted", *ARGS)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    return [r for r in lines(run.folder / RUN, "eval") if r["stage"] == STAGE][-1]


@pytest.mark.parametrize("role", KILLED)
def test_a_killed_trainer_rank_or_buffer_restarts_its_stage_from_the_last_checkpoint(
    run_env, tmp_path, role, uninterrupted
):
    step = random.Random(f"{role}/{SEED}").randint(1, STEPS - 2)
    proc = started(run_env, tmp_path, *STORED.get(role, ()))
    reached(proc, tmp_path, step)
    killed = kill(run_env, role)
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err[-3000:]
    run = tmp_path / RUN
    (restart,) = lines(run, "restart")
    assert restart["cause_role"] == role and restart["cause"].startswith(f"{role} died: killed by SIGKILL")
    # it resumed from the last checkpoint complete at the kill: the steps after it were trained again, each once
    saved = restart["from_checkpoint"]  # None: killed before the stage's first checkpoint, it restarted from its start
    resumed = json.loads((run / "checkpoints" / saved / "state.json").read_text())["stage_step"] if saved else 0
    assert resumed <= restart["step"] - (400 if FULL else 0) and resumed % (20 if FULL else 2) == 0
    again = [r["step"] for r in trained(run) if r["time"] > restart["time"]]
    assert again == [s + (400 if FULL else 0) for s in range(resumed + 1, STEPS + 1)]
    first_again = min(r["time"] for r in trained(run) if r["time"] > restart["time"])
    print(f"{role}: killed after step {step}, restarted from {saved} {first_again - killed:.1f} s")
    where = f"checkpoint {saved}" if saved else "its start (no complete checkpoint yet)"
    line = f"restarting stage {STAGE or 'run'} from {where} after {role} died"
    assert line in err and "(restart 1 of 3)" in err and "Traceback" not in err
    (summary,) = [
        s
        for s in json.loads(out)["stages"]  # stdout is the JSON alone (Ray's own lines go to stderr)
        if s["name"] == (STAGE or "run")
    ]
    assert ([r["role"] for r in summary["restarts"]], summary["steps"]) == ([role], STEPS)
    final = [r for r in lines(run, "eval") if r["stage"] == STAGE][-1]
    assert final["step"] == uninterrupted["step"]
    print(f"{role}: held-out accuracy {final['accuracy']:.3f}, uninterrupted {uninterrupted['accuracy']:.3f}")
    assert abs(final["accuracy"] - uninterrupted["accuracy"]) <= 0.06  # timing varies GRPO's batches (docs/runtime.md)
    assert_nothing_half_written(run)
    if SQL in STORED.get(role, ()):
        assert_each_explore_step_stored_and_trained_once(run, restart["time"], resumed)


def assert_each_explore_step_stored_and_trained_once(run: Path, restarted: float, resumed: int) -> None:
    """The SQLite store after a restart from train step `resumed`: each explore step's experiences once, those of the
    steps after it made again after the restart (seed 0 kills after train step 3: explore step 3 was stored before),
    each train step's batch once, none left over (1:1 in the shortened demo)."""
    import sqlite3

    batch = 16  # 4 tasks x 4 rollouts
    again = [(r["step"], r["experiences"]) for r in lines(run, "explorer") if r["time"] > restarted]
    assert again == [(s, batch) for s in range(resumed + 1, STEPS + 1)]  # none found stored already
    db = sqlite3.connect(str(run / "arith_experiences.db"))
    per_step = db.execute("SELECT explore_step, COUNT(*) FROM experiences GROUP BY explore_step").fetchall()
    assert per_step == [(s, batch) for s in range(1, STEPS + 1)]
    taken = db.execute("SELECT consumed_step, COUNT(*) FROM experiences GROUP BY consumed_step").fetchall()
    assert taken == [(s, batch) for s in range(1, STEPS + 1)]
    scope = f"{(run / 'run_id').read_text().strip()}#run#explores+trains"  # buffer/scope.py scope_name
    assert db.execute("SELECT DISTINCT stage, consumed_by FROM experiences").fetchall() == [(scope, scope)]


def test_every_kind_of_restart_draws_on_one_budget_and_a_spent_one_ends_the_run_with_the_cause(run_env, tmp_path):
    """max_restarts 1: a trainer rank's death restarts the stage; the engine's death after it finds the budget spent
    (the replacement's refusal, driver/replace.py; the stage restart's own is tests/runtime/driver/
    test_stage_restart.py's) and ends the run naming the engine first, the budget's words under it and in its record."""
    proc = started(run_env, tmp_path, "fault_tolerance.max_restarts=1", "buffer.total_steps=200")
    reached(proc, tmp_path, 1)
    kill(run_env, "trainer_node0.rank0")
    reached(proc, tmp_path, 1, restarts=1)
    killed = kill(
        run_env, "rollout.engine0", role_pid("TransformersEngine", Path(run_env["TRINITY_CHECKPOINT_ROOT_DIR"]))
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and time.time() - killed < 30, err[-3000:]
    first = err[err.index("trinity run: ") :].removeprefix("trinity run: ").splitlines()[0]
    assert first.startswith("rollout.engine0 died: killed by SIGKILL"), err[-3000:]
    spent = "the restart budget is spent (1 restarts within fault_tolerance.restart_window_s=3600 s already)"
    assert err[err.index("trinity run: ") :].splitlines()[1] == f"not restarted: {spent}", err[-3000:]
    run = tmp_path / RUN
    assert [r["cause_role"] for r in lines(run, "restart")] == ["trainer_node0.rank0"]
    assert [(f["cause_role"], f["not_restarted"]) for f in lines(run, "failure")] == [("rollout.engine0", spent)]
    assert_nothing_half_written(run)


def test_an_engine_sharing_the_trainers_devices_restarts_its_stage_and_sigterm_after_it_exits_143_cleanly(
    run_env, tmp_path
):
    """mode colocate: a dead engine is not replaced in place (it shares the trainer's devices), so the stage restarts
    from its last checkpoint and trains on; SIGTERM after that restart still ends the run 143, nothing left running:
    on a Ray the run started itself (the default), not a role, raylet or worker of it."""
    run_env = own_ray(run_env)
    proc = started(run_env, tmp_path, "mode=colocate", "buffer.total_steps=200")
    reached(proc, tmp_path, 3)
    kill(run_env, "rollout.engine0", role_pid("TransformersEngine", Path(run_env["TRINITY_CHECKPOINT_ROOT_DIR"])))
    reached(proc, tmp_path, 1, restarts=1)  # the restarted stage trains
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-3000:]
    (restart,) = lines(tmp_path / RUN, "restart")
    assert restart["cause"].startswith("rollout.engine0 died: killed by SIGKILL") and restart["from_checkpoint"]
    assert f"restarting stage run from checkpoint {restart['from_checkpoint']} after rollout.engine0 died" in err
    assert_nothing_half_written(tmp_path / RUN)
    time.sleep(3)  # Ray's processes end a moment after the driver
    # the Ray the run started inherits its environment: its raylet and workers carry the run's checkpoint root
    mine = f"TRINITY_CHECKPOINT_ROOT_DIR={run_env['TRINITY_CHECKPOINT_ROOT_DIR']}\0".encode()
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mine in Path(f"/proc/{pid}/environ").read_bytes():
                left.append(Path(f"/proc/{pid}/cmdline").read_bytes()[:80])
        except OSError:
            continue
    assert left == []  # no role actor, raylet or worker of the run's Ray
