"""Engines and the explorer come back (issue 49, parts 1 and 4): `kill -9` of the rollout engine or the explorer at a
step drawn for it (a seeded draw: TRINITY_CHAOS_SEED picks others) mid-GRPO, and the run goes on: the dead actor is
replaced on its bundle, the failed explore step runs again, and the run finishes with exit 0, no stage restarted (one
stage, no second launch), every step explored and trained once, and the summary, metrics.jsonl and the progress line
saying 1 restart. A stopped engine (SIGSTOP: hung, not dead) is found by the health check within its bound and
replaced the same way; a budget spent ends the run with the cause. fault_tolerance.max_restarts=0 keeps the fail-stop
(test_run.py, test_run_blame.py).
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

from tests.cli.test_run import GRPO_ONLY, RUN, lines
from tests.cli.test_run_blame import role_pid

pytestmark = [pytest.mark.ray, pytest.mark.train, pytest.mark.timeout(900)]  # a replacement starts a process

SEED = int(os.environ.get("TRINITY_CHAOS_SEED", "0"))
STEPS = 8
CLASSES = {"rollout.engine0": "TransformersEngine", "explorer": "Explorer"}


def started(env, cwd: Path, *args) -> subprocess.Popen:
    """`trinity run` with `args`, given 180 s to place and start each actor (a replacement too) on a loaded machine."""
    return subprocess.Popen(
        [sys.executable, "-m", "trinity", "run", "--timeout", "180", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def signalled_at(proc: subprocess.Popen, env, cwd: Path, role: str, trained: int, into: float, sig=signal.SIGKILL):
    """Send `sig` to the run's `role` actor `into` (a fraction) of a train step's time after its `trained`-th train
    step's line (a step's time: the gap between the last two trainer lines, 0 after the first: a fixed delay would
    outlast the run on a fast machine); returns when (epoch)."""
    run = cwd / RUN
    deadline = time.monotonic() + 600
    while not ((run / "metrics.jsonl").exists() and len(lines(run, "trainer")) >= trained):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "no step"
        time.sleep(0.05)
    at = [r["time"] for r in lines(run, "trainer")][max(trained - 2, 0) : trained]
    time.sleep(max(0.0, at[-1] + into * (at[-1] - at[0]) - time.time()))  # in the next step: explore, train or sync
    assert proc.poll() is None, f"the run ended before {role} was signalled: {proc.stderr.read()[-3000:]}"
    os.kill(role_pid(CLASSES[role], Path(env["TRINITY_CHECKPOINT_ROOT_DIR"])), sig)
    return time.time()


def finished(proc: subprocess.Popen, run: Path, role: str, steps: int) -> tuple[str, dict]:
    """The run ended 0 having replaced `role` once and explored and trained each step once; (stdout, its restart)."""
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-4000:]
    (restart,) = lines(run, "restart")
    assert restart["cause_role"] == role and restart["attempt"] == 1 and restart["max_restarts"] == 3
    assert f"replaced {role} after {role} died: " in err and "(restart 1 of 3)" in err
    assert f"run: 1 restart: {role} at step {restart['step']} after {role} died" in out
    assert [r["step"] for r in lines(run, "explorer")] == list(range(1, steps + 1))  # the failed step once, again
    assert [r["step"] for r in lines(run, "trainer")] == list(range(1, steps + 1))
    assert "failure" not in {r["role"] for r in lines(run)} and "Traceback" not in err
    return out, restart


@pytest.mark.parametrize("role", list(CLASSES))
def test_a_killed_engine_or_explorer_is_replaced_and_the_run_finishes(run_env, tmp_path, role):
    draw = random.Random(f"{role}/{SEED}")
    trained, into = draw.randint(2, STEPS - 3), draw.random()
    proc = started(run_env, tmp_path, *GRPO_ONLY, f"buffer.total_steps={STEPS}")
    signalled_at(proc, run_env, tmp_path, role, trained, into)
    _, restart = finished(proc, tmp_path / RUN, role, STEPS)
    assert restart["seconds"] < 60
    if role != "explorer":  # the new engine took the trainer's weights over a group formed anew with it
        assert restart["sync"].endswith("synced to the new engine over the weight-sync group formed anew")


def test_a_hung_engine_is_found_by_the_health_check_within_its_bound_and_replaced(run_env, tmp_path):
    interval, timeout = 1, 10  # room for a live engine on a loaded 2-core machine to answer
    health = (
        f"fault_tolerance.engine_health_interval_s={interval}",
        f"fault_tolerance.engine_health_timeout_s={timeout}",
    )
    proc = started(run_env, tmp_path, *GRPO_ONLY, f"buffer.total_steps={STEPS}", *health)
    stopped = signalled_at(proc, run_env, tmp_path, "rollout.engine0", 2, 0.3, signal.SIGSTOP)
    _, restart = finished(proc, tmp_path / RUN, "rollout.engine0", STEPS)
    assert "hung: no answer to a health check" in restart["cause"]
    found_s = restart["time"] - restart["seconds"] - stopped  # from the stop to the restart's start
    assert found_s < interval + timeout + 5, found_s  # a poll's second and a loaded machine's slack


def test_a_spent_budget_ends_the_run_with_the_cause(run_env, tmp_path):
    proc = started(run_env, tmp_path, *GRPO_ONLY, "buffer.total_steps=40", "fault_tolerance.max_restarts=1")
    run = tmp_path / RUN
    signalled_at(proc, run_env, tmp_path, "rollout.engine0", 1, 0.0)
    while not (run / "metrics.jsonl").exists() or not lines(run, "restart"):
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    signalled_at(proc, run_env, tmp_path, "rollout.engine0", len(lines(run, "trainer")) + 1, 0.0)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    assert "rollout.engine0 not restarted: 1 restarts within fault_tolerance.restart_window_s=3600 s already" in err
    first = err[err.index("trinity run: ") :].removeprefix("trinity run: ").splitlines()[0]
    assert first.startswith("rollout.engine0 died: killed by SIGKILL"), err[-3000:]
    assert len(lines(run, "restart")) == 1 and lines(run, "failure")[0]["cause_role"] == "rollout.engine0"


@pytest.mark.timeout(1800)  # the whole demo: ~1.5 min alone, several times that on a loaded 2-core machine
def test_the_demo_learns_as_an_uninterrupted_run_with_its_engine_killed_mid_grpo(run_env, tmp_path):
    """The whole demo (SFT, then 100 GRPO steps), its engine killed at a drawn GRPO step: held-out accuracy ends in the
    range uninterrupted runs end in (README: 0.660-0.840 over seeds 0-3; seed 0 0.840)."""
    draw = random.Random(f"demo/{SEED}")
    explored = draw.randint(5, 90)
    proc = started(run_env, tmp_path, "cluster.ray_address=local")
    run = tmp_path / RUN
    while not ((run / "metrics.jsonl").exists() and len(lines(run, "explorer")) >= explored):
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    os.kill(role_pid("TransformersEngine", Path(run_env["TRINITY_CHECKPOINT_ROOT_DIR"])), signal.SIGKILL)
    out, err = proc.communicate(timeout=1500)
    assert proc.returncode == 0, err[-4000:]
    print(json.dumps([(r["stage"], r["step"], r["accuracy"]) for r in lines(run, "eval")]), lines(run, "restart"))
    assert len(lines(run, "restart")) == 1 and "grpo: 1 restart: rollout.engine0" in out
    grpo = [r for r in lines(run, "eval") if r["stage"] == "grpo"]
    assert 0.62 <= grpo[-1]["accuracy"] <= 0.9 and grpo[-1]["accuracy"] > grpo[0]["accuracy"], json.dumps(grpo)
