"""`trinity run` with Trinity-RFT's explorer keys of issue 48, on the shortened demo, as a user runs it: a workflow of
the user's that plays one rollout (can_repeat = False), its rollouts played at once (explorer.concurrent_mode:
multi-threading); one task of step 2 that hangs, cut at its dynamic timeout (explorer.dynamic_timeout); and the runners'
state in the explorer's log every second (explorer.runner_state_report_interval). What each key did is read from what
the run leaves behind: experiences, metrics.jsonl, the explorer's log, and the workflow's own record of its plays."""

import json
import re
import textwrap

import pytest

from tests.cli.test_run import GRPO_ONLY, RUN, lines, trinity
from tests.session_ray import own_ray

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = pytest.mark.ray

# The user's workflows: the demo's arithmetic. Each play writes (task, repeat_times, thread, start, end, how it ended)
# to $W48_PLAYS; a play that hangs waits until its runner cuts it, then asks the model once more, which a cut task's
# model client refuses. OneRollout plays one rollout a play, going on only once the task's 4 plays are all playing; the
# first play of the 5th task to start (one of step 2's: step 1 has 4) hangs. Laggard's first task of each step hangs.
WORKFLOW = """
import json, os, threading, time

from trinity.runtime.workflows.arith import ArithWorkflow

_seen, _barriers, _lock = [], {}, threading.Lock()


def _played(workflow, hang, first=lambda: None):
    start, ended = time.time(), "done"
    try:
        first()
        if hang:
            while time.time() - start < 120 and not workflow.model.cut.is_set():
                time.sleep(0.05)
            ended = "cut" if workflow.model.cut.is_set() else "not cut"
        return ArithWorkflow.run(workflow)
    except Exception as exc:
        ended += f" then {type(exc).__name__}"
        raise
    finally:
        task = workflow.task
        play = [task.uid, task.repeat_times, threading.current_thread().name, start, time.time(), ended]
        with open(os.environ["W48_PLAYS"], "a") as out:
            out.write(json.dumps(play) + "\\n")


class OneRollout(ArithWorkflow):
    can_repeat = False

    def run(self):
        with _lock:
            first = self.task.uid not in _seen
            if first:
                _seen.append(self.task.uid)
            hang = first and len(_seen) == 5
            # a task's plays go on together only once all its repeat_times are playing: one at a time never would
            barrier = _barriers.setdefault(self.task.uid, threading.Barrier(4, timeout=30))
        return _played(self, hang, barrier.wait)


class Laggard(ArithWorkflow):
    def run(self):
        with _lock:
            _seen.append(self.task.uid)
            hang = len(_seen) % 4 == 1
        return _played(self, hang)
"""

KEYS = (
    "mode=explore",
    "buffer.total_steps=3",
    "buffer.trainer_input.experience_buffer.storage_type=file",
    "buffer.explorer_input.taskset.default_workflow_type=w48_workflow:OneRollout",
    "explorer.concurrent_mode=multi-threading",
    "explorer.dynamic_timeout.enable=true",
    "explorer.dynamic_timeout.ratio=50",  # far above a task's spread on a busy CPU, well below max_timeout
    "explorer.dynamic_timeout.warmup_min_steps=1",
    "explorer.max_retry_times=0",
    "explorer.runner_state_report_interval=1",
)


def played(run_env, tmp_path, *keys):
    """`trinity run` of the shortened demo with `keys`, the workflows above importable: (the process, the run
    directory, the plays the workflows recorded)."""
    (tmp_path / "w48_workflow.py").write_text(textwrap.dedent(WORKFLOW))
    plays = tmp_path / "plays.jsonl"
    env = dict(own_ray(run_env), W48_PLAYS=str(plays))  # the run's own module and file: a Ray with its environment
    env["PYTHONPATH"] = ":".join(p for p in (str(tmp_path), env.get("PYTHONPATH", "")) if p)
    proc = trinity(env, tmp_path, *GRPO_ONLY, *keys)
    records = [json.loads(line) for line in plays.read_text().splitlines()] if plays.exists() else []
    return proc, tmp_path / RUN, records


@pytest.fixture
def run48(run_env, tmp_path):
    return played(run_env, tmp_path, *KEYS)


def test_a_hung_task_is_cut_at_its_dynamic_timeout_runners_report_and_rollouts_play_at_once(run48):
    proc, run, plays = run48
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (run / "logs" / "explorer.log").read_text()

    # dynamic_timeout: step 1 ran under max_timeout; in step 2 one task hung and was cut at ratio x the average
    explored = lines(run, "explorer")
    assert [r["step"] for r in explored] == [1, 2, 3]
    assert [r["failed_tasks"] for r in explored] == [0, 1, 0]
    [cut] = re.findall(r"task (2/\d+/0) ran past its dynamic timeout of ([\d.]+) s", log)
    limit = float(cut[1])
    hung = [p for p in plays if p[5] != "done"]
    assert len(hung) == 1 and hung[0][5] == "cut then TaskCut"  # its client refused the call after the cut
    # the limit is 50 x the average of step 1's tasks (the first 4 to start), each as long as its plays took at least
    first = sorted({p[0]: min(q[3] for q in plays if q[0] == p[0]) for p in plays}.items(), key=lambda kv: kv[1])[:4]
    spans = [max(p[4] for p in plays if p[0] == uid) - start for uid, start in first]
    assert 50 * sum(spans) / 4 * 0.9 <= limit <= 50 * (max(spans) + 0.5) < 1800
    assert hung[0][4] - hung[0][3] < limit + 10  # it ended at the cut, not after its 120 s

    # concurrent_mode multi-threading: every task's 4 rollouts were one-rollout plays on threads of their own, at once
    by_task: dict[str, list] = {}
    for p in plays:
        by_task.setdefault(p[0], []).append(p)
    assert len(by_task) == 12 and all(len(ps) == 4 for ps in by_task.values())
    for ps in by_task.values():
        assert all(p[1] == 1 and re.fullmatch(r"runner0_\d+-run_\d", p[2]) for p in ps)
        assert max(p[3] for p in ps) < min(p[4] for p in ps)  # all 4 were running together
    experiences = [json.loads(line) for line in (run / "arith_experiences.jsonl").read_text().splitlines()]
    groups: dict[str, list] = {}
    for exp in experiences:
        groups.setdefault(exp["group"], []).append(exp["run"])
    assert len(groups) == 11 and all(sorted(r) == [0, 1, 2, 3] for r in groups.values())  # the cut task's are gone

    # runner_state_report_interval: the runners' table in the explorer's log, the hung task running in it
    assert log.count("runner state (explorer.runner_state_report_interval=1s)") >= 1
    assert re.search(rf"\| {re.escape(cut[0])}\s+\| running\s+\|", log), log[-3000:]


# explorer.over_rollout: Laggard's first task of each step hangs; the step waits for 3 of its 4 tasks, then 1 s,
# and leaves it behind.


def test_over_rollout_leaves_each_steps_slowest_task_behind_once_the_others_have_ended(run_env, tmp_path):
    proc, run, records = played(
        run_env,
        tmp_path,
        "mode=explore",
        "buffer.total_steps=2",
        "buffer.trainer_input.experience_buffer.storage_type=file",
        "buffer.explorer_input.taskset.default_workflow_type=w48_workflow:Laggard",
        "explorer.max_retry_times=0",
        "explorer.over_rollout.ratio=0.25",  # wait for ceil(4 x 0.75) = 3 tasks
        "explorer.over_rollout.wait_after_min=1",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    explored = lines(run, "explorer")
    assert [(r["step"], r["tasks_left_behind"], r["failed_tasks"]) for r in explored] == [(1, 1, 0), (2, 1, 0)]
    hung = [p for p in records if p[5] != "done"]
    assert [p[5] for p in hung] == ["cut then TaskCut"] * 2  # each cut, its client refused the call after
    assert all(p[4] - p[3] < 30 for p in hung)  # left behind about a second after the others, not after 120 s
    experiences = [json.loads(line) for line in (run / "arith_experiences.jsonl").read_text().splitlines()]
    assert {e["group"] for e in experiences} == {p[0] for p in records if p[5] == "done"}  # 3 tasks a step
    assert len({e["group"] for e in experiences}) == 6
    assert "2 of 4 tasks left behind" not in (run / "logs" / "explorer.log").read_text()
    assert "1 of 4 tasks left behind (explorer.over_rollout)" in (run / "logs" / "explorer.log").read_text()
