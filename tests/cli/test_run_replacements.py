"""Engines and the explorer come back (issue 49, parts 1 and 4): `kill -9` of the rollout engine, then a stop of the
new one (SIGSTOP: hung, not dead: found by the health check within its bound), then `kill -9` of the explorer, each at
a step drawn for it (a seeded draw: TRINITY_CHAOS_SEED picks others) mid-GRPO in one run, and the run goes on: each
actor is replaced on its bundle, the failed explore step runs again, and the run finishes with exit 0, no stage
restarted (one stage, no second launch), every step explored and trained once, and the summary, metrics.jsonl and
the stderr lines saying each restart (a spent budget: test_run_restarts.py, one budget for every kind of restart).
fault_tolerance.max_restarts=0 keeps the fail-stop (test_run_blame.py).
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_run import GRPO_ONLY, RUN, lines
from tests.cli.test_run_blame import role_pid, role_pids

pytestmark = [pytest.mark.ray, pytest.mark.train, pytest.mark.timeout(900)]  # a replacement starts a process

SEED = int(os.environ.get("TRINITY_CHAOS_SEED", "0"))
STEPS = 12
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


def signalled_at(
    proc: subprocess.Popen,
    env,
    cwd: Path,
    role: str,
    trained: int,
    into: float,
    sig=signal.SIGKILL,
    of: int = 0,
    actor_class: str | None = None,
    child: str | None = None,
):
    """Send `sig` to the run's `role` actor (of class `actor_class`, by default CLASSES'; where the run has several of
    its class, the `of`-th process, oldest first; or to its child process named `child`, as /proc's comm says) `into`
    (a fraction) of a train step's time after its `trained`-th train step's line (a step's time: the shortest gap
    between trainer lines so far, 0 after the first: a fixed delay would outlast the run on a fast machine); returns
    when (epoch)."""
    run = cwd / RUN
    deadline = time.monotonic() + 600
    while not ((run / "metrics.jsonl").exists() and len(lines(run, "trainer")) >= trained):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "no step"
        time.sleep(0.05)
    at = [r["time"] for r in lines(run, "trainer")][:trained]
    step_s = min((b - a for a, b in zip(at, at[1:])), default=0.0)  # the fastest: a gap may hold a restart
    time.sleep(max(0.0, at[-1] + into * step_s - time.time()))  # in the next step: explore, train or sync
    assert proc.poll() is None, f"the run ended before {role} was signalled: {proc.stderr.read()[-3000:]}"
    pid = role_pids(actor_class or CLASSES[role], Path(env["TRINITY_CHECKPOINT_ROOT_DIR"]))[of]
    os.kill(child_named(pid, child) if child else pid, sig)
    return time.time()


def child_named(parent: int, comm: str) -> int:
    """The child process of `parent` whose name (/proc's comm) is `comm`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        name, ppid = stat[stat.index("(") + 1 : stat.rindex(")")], int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == parent and name == comm:
            return int(pid)
    raise AssertionError(f"no child {comm!r} of process {parent}")


def finished(proc: subprocess.Popen, run: Path, roles: list[str], steps: int) -> tuple[str, list[dict]]:
    """The run ended 0 having replaced `roles` in turn and explored and trained each step once; (stdout, its
    restarts)."""
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-4000:]
    restarts = lines(run, "restart")
    assert [(r["cause_role"], r["attempt"], r["max_restarts"]) for r in restarts] == [
        (role, n, 3) for n, role in enumerate(roles, 1)
    ]
    for n, (role, restart) in enumerate(zip(roles, restarts), 1):
        assert f"replaced {role} after {role} " in err and f"(restart {n} of 3)" in err
        assert f"{role} at step {restart['step']} after {role} " in out
    count = len(roles)
    assert f"run: {count} restart{'s' if count > 1 else ''}: " in out
    assert [r["step"] for r in lines(run, "explorer")] == list(range(1, steps + 1))  # each failed step once, again
    assert [r["step"] for r in lines(run, "trainer")] == list(range(1, steps + 1))
    assert "failure" not in {r["role"] for r in lines(run)} and "Traceback" not in err and "Unhandled error" not in err
    return out, restarts


def test_a_killed_engine_a_hung_engine_and_a_killed_explorer_are_each_replaced_and_the_run_finishes(run_env, tmp_path):
    """One run, the budget's three replacements, each at a step and a moment drawn for it: the engine killed, the new
    engine stopped (hung, not dead: found by the health check within its bound), the explorer killed."""
    draw = random.Random(f"replacements/{SEED}")
    first = draw.randint(2, 3)
    second = first + 2 + draw.randint(0, 1)
    third = second + 2 + draw.randint(0, 1)
    interval, timeout = 1, 10  # room for a live engine on a loaded 2-core machine to answer
    health = (
        f"fault_tolerance.engine_health_interval_s={interval}",
        f"fault_tolerance.engine_health_timeout_s={timeout}",
    )
    proc = started(run_env, tmp_path, *GRPO_ONLY, f"buffer.total_steps={STEPS}", *health)
    run = tmp_path / RUN
    signalled_at(proc, run_env, tmp_path, "rollout.engine0", first, draw.random())
    replaced(proc, run, 1)
    stopped = signalled_at(proc, run_env, tmp_path, "rollout.engine0", second, draw.random(), signal.SIGSTOP)
    replaced(proc, run, 2)
    signalled_at(proc, run_env, tmp_path, "explorer", third, draw.random())
    _, restarts = finished(proc, run, ["rollout.engine0", "rollout.engine0", "explorer"], STEPS)
    assert restarts[0]["cause"].startswith("rollout.engine0 died: ")
    assert "hung: no answer to a health check" in restarts[1]["cause"]
    found_s = restarts[1]["time"] - restarts[1]["seconds"] - stopped  # from the stop to the restart's start
    assert found_s < interval + timeout + 5, found_s  # a poll's second and a loaded machine's slack
    assert restarts[2]["cause"].startswith("explorer died: ")
    assert all(r["seconds"] < 60 for r in restarts)
    # each new engine took the trainer's weights over a group formed anew with it
    assert all(
        r["sync"].endswith("synced to the new engine over the weight-sync group formed anew") for r in restarts[:2]
    )


def test_one_of_two_engines_killed_is_replaced_and_their_weight_sync_group_formed_anew(run_env, tmp_path):
    """Two engines in one weight-sync group: the one killed at a drawn moment is replaced, the group (which included
    the dead engine) is formed again with the survivor and the new engine, and the run finishes with every step."""
    draw = random.Random(f"two-engines/{SEED}")
    two = ("explorer.rollout_model.engine_num=2", "cluster.gpu_per_node=3")  # a slot each, one for the trainer
    proc = started(run_env, tmp_path, *GRPO_ONLY, "buffer.total_steps=8", *two)
    run = tmp_path / RUN
    signalled_at(proc, run_env, tmp_path, "rollout.engine0", draw.randint(1, 3), draw.random(), of=draw.randint(0, 1))
    replaced(proc, run, 1)
    role = lines(run, "restart")[0]["cause_role"]
    assert role in ("rollout.engine0", "rollout.engine1"), role  # either may be the older process
    _, [restart] = finished(proc, run, [role], 8)
    assert restart["sync"].endswith("synced to the new engine over the weight-sync group formed anew"), restart


def engine_killed_after(proc: subprocess.Popen, env, run: Path, explored: int) -> None:
    """SIGKILL the run's transformers engine once `explored` explorer lines are written."""
    while not ((run / "metrics.jsonl").exists() and len(lines(run, "explorer")) >= explored):
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    os.kill(role_pid("TransformersEngine", Path(env["TRINITY_CHECKPOINT_ROOT_DIR"])), signal.SIGKILL)


def replaced(proc: subprocess.Popen, run: Path, count: int) -> None:
    """Wait for the run's `count`-th restart record."""
    deadline = time.monotonic() + 300
    while not ((run / "metrics.jsonl").exists() and len(lines(run, "restart")) >= count):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "no restart"
        time.sleep(0.1)


@pytest.mark.timeout(1800)  # the whole demo: ~1.5 min alone, several times that on a loaded 2-core machine
def test_the_demo_learns_as_an_uninterrupted_run_with_its_engine_killed_mid_grpo(run_env, tmp_path):
    """The whole demo (SFT, then 100 GRPO steps), its engine killed at a drawn GRPO step: held-out accuracy ends in the
    range uninterrupted runs end in (README: 0.660-0.840 over seeds 0-3; seed 0 0.840)."""
    draw = random.Random(f"demo/{SEED}")
    explored = draw.randint(5, 90)
    proc = started(run_env, tmp_path, "cluster.ray_address=local")
    run = tmp_path / RUN
    engine_killed_after(proc, run_env, run, explored)
    out, err = proc.communicate(timeout=1500)
    assert proc.returncode == 0, err[-4000:]
    print(json.dumps([(r["stage"], r["step"], r["accuracy"]) for r in lines(run, "eval")]), lines(run, "restart"))
    assert len(lines(run, "restart")) == 1 and "grpo: 1 restart: rollout.engine0" in out
    grpo = [r for r in lines(run, "eval") if r["stage"] == "grpo"]
    assert 0.62 <= grpo[-1]["accuracy"] <= 0.9 and grpo[-1]["accuracy"] > grpo[0]["accuracy"], json.dumps(grpo)


def test_an_explore_runs_killed_engine_is_replaced_and_each_explore_step_stored_once(run_env, tmp_path):
    """mode explore (no trainer in the run; its experiences in SQLite for a train run, weights by checkpoint): the
    engine killed after a drawn explore step is replaced, the step it failed runs again, and the run ends 0 with each
    explore step explored and stored once."""
    import sqlite3

    from trinity.runtime.sync import files

    steps, killed_after = 30, random.Random(f"explore/{SEED}").randint(2, 4)
    run = tmp_path / RUN
    published = files.published_file(run)  # a train run's weights, as it publishes them (the demo model's, v5)
    published.parent.mkdir(parents=True)
    shutil.copy(Path(run_env["TRINITY_DEMO_DIR"]) / "model" / "model.safetensors", published)
    files.mark(published, 5)
    stored = ("buffer.trainer_input.experience_buffer.storage_type=sql", "synchronizer.sync_method=checkpoint")
    proc = started(run_env, tmp_path, *GRPO_ONLY, "mode=explore", *stored, f"buffer.total_steps={steps}")
    engine_killed_after(proc, run_env, run, killed_after)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-4000:]
    [restart] = lines(run, "restart")
    assert (restart["cause_role"], restart["attempt"]) == ("rollout.engine0", 1), restart
    assert "replaced rollout.engine0 after rollout.engine0 died: killed by SIGKILL" in err and "run: 1 restart: " in out
    assert [r["step"] for r in lines(run, "explorer")] == list(range(1, steps + 1))
    # the published weights loaded at the start and again after the replacement (the new engine held the stage's)
    loads = [(r["method"], r["weight_version"], r["time"] > restart["time"]) for r in lines(run, "synchronizer")]
    assert loads == [("checkpoint", 5, False), ("checkpoint", 5, True)], loads
    assert {r["weight_version"] for r in lines(run, "explorer")} == {5}
    db = sqlite3.connect(str(run / "arith_experiences.db"))
    per_step = db.execute("SELECT explore_step, COUNT(*) FROM experiences GROUP BY explore_step").fetchall()
    assert per_step == [(s, 16) for s in range(1, steps + 1)]  # 4 tasks x 4 rollouts
