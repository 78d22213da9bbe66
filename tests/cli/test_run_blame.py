"""Blame is exact (issue 49): a role killed with SIGKILL in the middle of a run ends `trinity run` within seconds with
exit 1 where no restart is allowed (fault_tolerance.max_restarts=0: the fail-stop of before), and the failure's first
line names that role and the signal, not a peer that lost its connection to it (the trainer rank's gloo error used to
come first now and then when an engine was killed); the peers that failed because of it follow ("then: ...").
metrics.jsonl's failure line and the JSON output say the same. The run is on a Ray cluster of the test's, which
outlives it: no actor of the run is alive after it and no placement group of it is left.

The kill lands at a step and a moment drawn for each role (a seeded draw: rerun with another seed to try others).
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
from tests.session_ray import role_processes

# its waits (the State API, a step, the end) outlast pytest's 300 s in the worst case: each says what it waited for
pytestmark = [pytest.mark.ray, pytest.mark.train, pytest.mark.timeout(900)]

# role -> its actor's class, as Ray names its process (ray::<class>): the engine, whose death the trainer rank's gloo
# error used to be blamed for, and the trainer rank, whose peers fail alike; the buffer's death is named the same way
# by the restart it causes (test_run_restarts.py: the restart's cause is "buffer died: killed by SIGKILL")
KILLED = {"rollout.engine0": "TransformersEngine", "trainer_node0.rank0": "TrainerRank"}
SEED = int(os.environ.get("TRINITY_BLAME_SEED", "0"))


def role_pids(actor_class: str, checkpoints: Path) -> list[int]:
    """The processes of the run's `actor_class` actors, oldest first: Ray titles each ray::<class>, and each writes its
    stderr into its log under the run's checkpoint root (another test's runs on this Ray have their own)."""
    found = []
    for pid in role_processes(checkpoints):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(f"ray::{actor_class}".encode()):
                found.append(pid)
        except OSError:  # ended meanwhile
            continue
    return found


def role_pid(actor_class: str, checkpoints: Path) -> int:
    """The process of the run's one `actor_class` actor."""
    found = role_pids(actor_class, checkpoints)
    assert len(found) == 1, f"{len(found)} processes of {actor_class}"
    return found[0]


def state_api_answers(list_actors, within_s: float = 240) -> None:
    """Wait for Ray's State API (`list_actors`), which asks the cluster's dashboard: the dashboard announces itself
    within seconds on a quiet machine but took over the API's own 40 s wait on one under the load of a second test
    worker (pyproject.toml's addopts), while the run started beside it."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            list_actors()
            return
        except Exception as exc:  # the State API's own: the dashboard's address not yet in the GCS, or refused
            assert time.monotonic() < deadline, f"Ray's State API did not answer in {within_s} s: {exc}"
            time.sleep(1)


@pytest.mark.parametrize("role", KILLED)
def test_a_role_killed_mid_run_is_named_first_with_its_signal_and_nothing_is_left(run_env, tmp_path, role):
    """On a Ray cluster of the test's, which outlives the run: after the kill, no actor of the run is alive and no
    placement group of it is left."""
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.state import list_actors, list_placement_groups

    draw = random.Random(f"{role}/{SEED}")
    step, delay = draw.randint(1, 3), draw.uniform(0.0, 1.5)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4})
    try:
        ray.init(address=cluster.address)
        env = {**run_env, "RAY_ADDRESS": cluster.address}
        # fail-stop (fault_tolerance.max_restarts=0): the stage would restart, or an engine be replaced, otherwise
        # (test_run_restarts.py, test_run_replacements.py)
        args = (*GRPO_ONLY, "cluster.ray_address=auto", "buffer.total_steps=200", "fault_tolerance.max_restarts=0")
        proc = subprocess.Popen(
            [sys.executable, "-m", "trinity", "run", *args, "--quiet", "--format", "json"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        run = tmp_path / RUN
        state_api_answers(list_actors)
        deadline = time.monotonic() + 400
        while not ((run / "metrics.jsonl").exists() and len(lines(run, "trainer")) >= step):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "no step"
            time.sleep(0.05)
        time.sleep(delay)  # somewhere in the next step: exploring, training or syncing
        # the cluster's workers have the test's environment, not the run's: its actor found by class
        (actor,) = list_actors(filters=[("class_name", "=", KILLED[role]), ("state", "=", "ALIVE")])
        os.kill(actor.pid, signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=120)
        ended_s = time.monotonic() - killed
        assert proc.returncode == 1 and ended_s < 15, (proc.returncode, ended_s, err[-3000:])
        first, *rest = err[err.index("trinity run: ") :].removeprefix("trinity run: ").splitlines()
        assert first.startswith(f"{role} died: killed by SIGKILL"), err[-3000:]
        assert "every actor and placement group was removed" in err and "Traceback" not in err
        (record,) = lines(run, "failure")  # the run's record says what the user read, in the same order
        assert lines(run, "restart") == [] and "not restarted" not in err  # the fail-stop of before
        assert first.startswith(record["cause"]) and (record["cause_role"], record["died"]) == (role, True)
        then = [line.removeprefix("then: ").split("; every actor")[0] for line in rest if line.startswith("then: ")]
        assert then == record["then"][: len(then)]  # a long message is cut, the record is whole
        # stdout is the JSON alone: Ray's own "(raylet) A worker died ..." line went to stderr
        shown = json.loads(out)
        assert shown["failure"] == {k: record[k] for k in ("cause", "cause_role", "died", "how", "then")}
        mine = ("TrainerRank", "Explorer", "ExperienceBuffer", "TransformersEngine")
        assert [a for a in list_actors(filters=[("state", "=", "ALIVE")]) if a.class_name in mine] == []
        assert [g for g in list_placement_groups() if g.state != "REMOVED"] == []
    finally:
        ray.shutdown()
        cluster.shutdown()
