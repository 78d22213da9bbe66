"""The explorer's runners under Trinity-RFT's explorer keys: the dynamic timeout (explorer.dynamic_timeout), the
runner state report (explorer.runner_state_report_interval), the repeats of a one-rollout workflow
(explorer.concurrent_mode) and over-rollout (explorer.over_rollout); unit by unit, then through the explorer role's
own task loop."""

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from trinity.config.schema.explorer import DynamicTimeoutConfig
from trinity.runtime.experience import Experience
from trinity.runtime.explorer import runners
from trinity.runtime.explorer.runners import (
    Board,
    Quorum,
    Reporter,
    Run,
    TaskCut,
    TaskLeftBehind,
    Timeouts,
    repeats,
    wait,
)
from trinity.runtime.workflows.base import Workflow

from .test_role import explorer  # noqa: F401 (the fixture)


def dynamic(enable=True, ratio=3.0, warmup_min_steps=1):
    return DynamicTimeoutConfig(enable=enable, ratio=ratio, warmup_min_steps=warmup_min_steps)


def test_the_timeout_is_max_timeout_until_the_warmup_steps_are_done_then_ratio_times_the_average():
    t = Timeouts(100, dynamic(ratio=3.0, warmup_min_steps=2))
    t.record(2.0)
    t.record(4.0)
    assert t.limit() == 100.0  # no step done yet
    t.step_done()
    assert t.limit() == 100.0  # one of two warmup steps
    t.step_done()
    assert t.limit() == pytest.approx(9.0)  # 3 x (2 + 4) / 2
    t.record(60.0)
    assert t.limit() == 66.0  # 3 x 22
    t.record(400.0)
    assert t.limit() == 100.0  # 3 x 116.5, bounded by max_timeout


def test_a_disabled_dynamic_timeout_or_one_with_no_task_timed_yet_is_max_timeout():
    off = Timeouts(50, dynamic(enable=False, warmup_min_steps=0))
    off.record(1.0)
    off.step_done()
    assert off.limit() == 50.0
    none_yet = Timeouts(50, dynamic(warmup_min_steps=0))
    assert none_yet.limit() == 50.0  # steps done, but no task to average
    none_yet.record(1.0)
    assert none_yet.limit() == 3.0


def test_a_task_past_its_limit_is_cut_timed_and_its_cut_flag_set():
    timeouts = Timeouts(100, dynamic())
    run = Run("2/0/0", counted=True)
    release = threading.Event()
    with ThreadPoolExecutor(1) as pool:

        def slow():
            run.begin(0.3)
            release.wait(5)
            run.end()
            return ["late"]

        future = pool.submit(slow)
        started = time.monotonic()
        with pytest.raises(TaskCut, match=r"task 2/0/0 ran past its dynamic timeout of 0.30 s"):
            wait(future, run, 100, timeouts)
        assert 0.25 < time.monotonic() - started < 2.0
        assert run.cut.is_set()
        release.set()
    assert timeouts.tasks == 1 and timeouts.seconds == pytest.approx(0.3)  # a cut task counts as its limit


def test_a_task_that_overran_is_cut_even_if_it_ended_before_it_was_waited_for():
    timeouts = Timeouts(100, dynamic())
    run = Run("2/1/0", counted=True)
    with ThreadPoolExecutor(1) as pool:

        def overran():
            run.begin(0.1)
            time.sleep(0.3)
            run.end()
            return ["late"]

        future = pool.submit(overran)
        future.result()
        with pytest.raises(TaskCut, match="ran past its dynamic timeout of 0.10 s"):
            wait(future, run, 100, timeouts)
    assert run.cut.is_set()


def test_while_it_waits_for_one_task_every_other_task_past_its_limit_is_cut_at_once():
    timeouts = Timeouts(100, dynamic())
    slow, hung = Run("2/0/0", counted=True), Run("2/1/0", counted=True)
    seen_cut = threading.Event()
    with ThreadPoolExecutor(2) as pool:

        def long_but_in_time():
            slow.begin(10)
            time.sleep(1.5)
            slow.end()
            return ["slow"]

        def hanging():
            hung.begin(0.2)
            if hung.cut.wait(5):  # a workflow's model client sees the flag at its next call
                seen_cut.set()
            hung.end()
            raise TaskCut("refused")

        first, second = pool.submit(long_but_in_time), pool.submit(hanging)
        assert wait(first, slow, 100, timeouts, [slow, hung]) == ["slow"]
        assert seen_cut.is_set()  # cut while the explorer waited for the first task, not when it came to this one
        with pytest.raises(TaskCut, match="2/1/0 ran past"):
            wait(second, hung, 100, timeouts, [slow, hung])


def test_a_task_in_time_returns_its_result_and_an_eval_task_is_not_counted():
    timeouts = Timeouts(100, dynamic())
    with ThreadPoolExecutor(1) as pool:
        for counted in (True, False):
            run = Run("1/0/0", counted=counted)

            def quick(run=run, counted=counted):
                run.begin(10)
                time.sleep(0.05)
                run.end()
                return [counted]

            assert wait(pool.submit(quick), run, 100, timeouts) == [counted]
            assert not run.cut.is_set()
    assert timeouts.tasks == 1 and timeouts.seconds >= 0.05


def test_a_task_that_never_starts_is_given_up_after_max_timeout_of_waiting():
    timeouts = Timeouts(1, dynamic(enable=False))
    run = Run("1/3/0", counted=True)
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        pool.submit(gate.wait, 5)  # the only runner is busy
        future = pool.submit(lambda: run.begin(1))
        with pytest.raises(TaskCut, match=r"task 1/3/0 waited 0.6 s for a runner and never started"):
            wait(future, run, 0.6, timeouts)
        gate.set()
    assert timeouts.tasks == 0  # it never ran


def test_the_board_lists_every_runner_with_its_task_state_and_running_time():
    board = Board(lanes=2, slots=2)
    with ThreadPoolExecutor(2, thread_name_prefix="runner1") as pool:
        pool.submit(board.begin, 1, "3/5/0").result()
    now = time.time() + 2.5
    states = {s["runner_id"]: s for s in board.states(now)}
    assert sorted(states) == [0, 1, 2, 3]
    assert states[2]["workflow_id"] == "3/5/0" and states[2]["state"] == "running" and states[2]["engine"] == 1
    assert float(states[2]["running_time"].rstrip("s")) == pytest.approx(2.5, abs=0.2)
    assert all(states[r]["state"] == "idle" for r in (0, 1, 3))
    header, rule, *rows = board.table(now)
    assert header.split(" | ")[0].strip() == "runner_id" and "workflow_id" in header and set(rule) <= {"-", "+"}
    assert len(rows) == 4 and "3/5/0" in rows[2] and "running" in rows[2]


def test_a_runner_that_finished_shows_done_and_how_long_it_ran():
    board = Board(lanes=1, slots=1)
    with ThreadPoolExecutor(1, thread_name_prefix="runner0") as pool:
        pool.submit(board.begin, 0, "1/0/0").result()
        time.sleep(0.2)
        pool.submit(board.end, 0).result()
    [state] = board.states(time.time() + 100)
    assert state["state"] == "done" and state["terminate_time"] != "-"
    assert 0.15 < float(state["running_time"].rstrip("s")) < 3.0  # its run, not the 100 s since


def test_the_reporter_writes_the_table_to_the_log_every_interval(caplog):
    board = Board(lanes=1, slots=1)
    with ThreadPoolExecutor(1, thread_name_prefix="runner0") as pool:
        pool.submit(board.begin, 0, "7/1/0").result()
    log = logging.getLogger("test-runner-state")
    with caplog.at_level("INFO", logger=log.name):
        reporter = Reporter(board, 0.2, log)
        time.sleep(1.0)
        reporter.stop()
    messages = [r.getMessage() for r in caplog.records if r.name == log.name]
    reports = [m for m in messages if m.startswith("runner state")]
    assert 2 <= len(reports) <= 5  # at 0.2, 0.4, ... s
    assert sum("7/1/0" in m and "running" in m for m in messages) == len(reports)


def _task(repeat_times):
    from trinity.runtime.workflows.base import Task

    task = Task.__new__(Task)
    for name in Task.__dataclass_fields__:
        object.__setattr__(task, name, None)
    object.__setattr__(task, "repeat_times", repeat_times)
    return task


def _exp(tag):
    return Experience(prompt_ids=[1], response_ids=[2], group=tag)


def test_sequential_repeats_play_one_rollout_at_a_time_in_order_and_stop_at_the_first_failure():
    task = _task(4)
    running, most, seen = [0], [0], []
    lock = threading.Lock()

    def play(t):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        seen.append(t.repeat_times)
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return [_exp(str(len(seen)))]

    out = repeats("sequential", task, play)
    assert [e.group for e in out] == ["1", "2", "3", "4"] and seen == [1, 1, 1, 1] and most[0] == 1

    calls = []

    def failing(t):
        calls.append(t)
        raise RuntimeError("run 1 failed")

    with pytest.raises(RuntimeError, match="run 1 failed"):
        repeats("sequential", task, failing)
    assert len(calls) == 1


def test_multi_threading_repeats_play_every_rollout_at_once():
    barrier = threading.Barrier(4, timeout=5)  # passes only when all 4 rollouts run together

    def play(t):
        assert t.repeat_times == 1
        return [_exp(str(barrier.wait()))]

    out = repeats("multi-threading", _task(4), play)
    assert sorted(e.group for e in out) == ["0", "1", "2", "3"]
    with pytest.raises(threading.BrokenBarrierError):  # sequential never has two at once
        repeats("sequential", _task(2), lambda t: [_exp(str(threading.Barrier(2, timeout=0.2).wait()))])


# the explorer role's own loop: workflows on its runner threads, a fake model client


class FakeClient:
    def __init__(self):
        self.replies = SimpleNamespace(complete=lambda e: e)
        self.cut = None


class Napping(Workflow):
    """Sleeps `naps[row index]` seconds (0.05 unless named), in slices, asking its client between them."""

    naps: dict = {}
    played: list = []

    def run(self):
        nap = self.naps.get(self.task.uid, 0.05)
        end = time.monotonic() + nap
        while time.monotonic() < end:
            if self.model.cut is not None and self.model.cut.is_set():
                self.played.append(("stopped", self.task.uid))
                raise TaskCut("cut")
            time.sleep(0.01)
        self.played.append(("done", self.task.uid))
        return [_exp(self.task.uid) for _ in range(self.task.repeat_times)]


class OneRollout(Napping):
    """Plays one rollout; counts the plays running at once, and waits at `barrier` where one is set."""

    can_repeat = False
    barrier = None
    running, most = 0, 0
    lock = threading.Lock()

    def run(self):
        with self.lock:
            OneRollout.running += 1
            OneRollout.most = max(OneRollout.most, OneRollout.running)
        try:
            if self.barrier is not None:
                self.barrier.wait()
            return super().run()
        finally:
            with self.lock:
                OneRollout.running -= 1


def _looping(role, workflow, monkeypatch, slots=2):
    ts = role.train[0]
    for uid in ts.workflows:
        ts.workflows[uid] = workflow
    role.pools = [ThreadPoolExecutor(slots, thread_name_prefix="runner0")]
    role.board = Board(1, slots)
    role.timeouts = Timeouts(role.config.explorer.max_timeout, role.config.explorer.dynamic_timeout)
    monkeypatch.setattr(role, "_client", lambda engine, sampling: FakeClient())
    return ts


def test_the_explorer_cuts_a_slow_task_at_its_dynamic_timeout_after_the_warmup_step(explorer, monkeypatch):
    role = explorer(
        "explorer.dynamic_timeout.enable=true",
        "explorer.dynamic_timeout.ratio=4",
        "explorer.dynamic_timeout.warmup_min_steps=1",
        "explorer.max_timeout=30",
        "explorer.max_retry_times=0",
        "buffer.batch_size=2",
    )
    ts = _looping(role, Napping, monkeypatch)
    Napping.played = []
    step1 = [(ts, t) for t in ts.tasks[:2]]
    step2 = [(ts, t) for t in ts.tasks[2:4]]
    Napping.naps = {step2[1][1].uid: 20.0}  # far past 4 x 0.05 s, well within max_timeout
    exps, failed, _ = role._run(step1, "step 1", 1)
    role.timeouts.step_done()
    assert failed == 0 and len(exps) == 2 * ts.tasks[0].repeat_times
    limit = role.timeouts.limit()
    assert 4 * 0.05 <= limit < 4.0
    started = time.monotonic()
    exps, failed, _ = role._run(step2, "step 2", 2)
    assert time.monotonic() - started < limit + 4.0  # cut at 4 x the average, not after its 20 s
    assert failed == 1 and {e.group for e in exps} == {step2[0][1].uid}
    time.sleep(0.2)
    assert ("stopped", step2[1][1].uid) in Napping.played  # its client refused it: the runner is free again
    for pool in role.pools:
        pool.shutdown()


def test_without_the_dynamic_timeout_the_same_slow_task_runs_to_its_end(explorer, monkeypatch):
    role = explorer("explorer.max_timeout=30", "buffer.batch_size=2")
    ts = _looping(role, Napping, monkeypatch)
    Napping.played = []
    role._run([(ts, t) for t in ts.tasks[:2]], "step 1", 1)
    role.timeouts.step_done()
    Napping.naps = {ts.tasks[3].uid: 1.0}
    exps, failed, _ = role._run([(ts, t) for t in ts.tasks[2:4]], "step 2", 2)
    assert failed == 0 and ("done", ts.tasks[3].uid) in Napping.played
    assert role.timeouts.limit() == 30.0


@pytest.mark.parametrize("mode", ["sequential", "multi-threading"])
def test_a_one_rollout_workflow_is_played_repeat_times_as_concurrent_mode_says(explorer, monkeypatch, mode):
    role = explorer(f"explorer.concurrent_mode={mode}", "buffer.batch_size=1")
    ts = _looping(role, OneRollout, monkeypatch, slots=1)
    OneRollout.played, OneRollout.naps, OneRollout.most = [], {}, 0
    task = ts.tasks[0]
    # multi-threading: the plays pass only when all of them play at once (one at a time, the barrier breaks)
    OneRollout.barrier = threading.Barrier(task.repeat_times, timeout=10) if mode == "multi-threading" else None
    try:
        exps, failed, _ = role._run([(ts, task)], "step 1", 1)
    finally:
        OneRollout.barrier = None
        role.pools[0].shutdown()
    # each play one rollout: repeat_times of them, numbered as runs 0 .. repeat_times - 1
    assert failed == 0 and len(OneRollout.played) == task.repeat_times > 1
    assert sorted(e.run for e in exps) == list(range(task.repeat_times))
    assert OneRollout.most == (1 if mode == "sequential" else task.repeat_times)


def test_a_cut_task_is_not_retried_and_its_client_refuses_further_calls(explorer, monkeypatch):
    role = explorer("explorer.max_retry_times=3")
    ts = role.train[0]
    task = ts.tasks[0]
    client = FakeClient()
    client.cut = threading.Event()
    client.cut.set()
    ts.workflows[task.uid] = Napping
    Napping.played, Napping.naps = [], {task.uid: 1.0}
    with pytest.raises(TaskCut):
        role._retried(ts, task, client)
    assert Napping.played == [("stopped", task.uid)]  # one try, no retry


def test_a_real_model_client_refuses_a_call_once_its_task_is_cut():
    from trinity.runtime.explorer.model_client import ModelClient

    client = ModelClient.__new__(ModelClient)  # no engine: a cut client never reaches it
    client.cut = threading.Event()
    client.cut.set()
    with pytest.raises(TaskCut):
        client.generate("a prompt", 1)
    with pytest.raises(TaskCut):
        client.reply([])


def test_runner_state_reports_start_with_the_explorer_and_stop_with_it(explorer):
    role = explorer("explorer.runner_state_report_interval=1")
    assert isinstance(role.reporter, runners.Reporter)
    role.release()
    assert role.reporter is None
    assert explorer().reporter is None  # 0: no reports


def test_a_task_given_up_on_before_its_runner_took_it_plays_nothing_when_it_gets_one(explorer, monkeypatch):
    role = explorer("buffer.batch_size=1")
    ts = _looping(role, Napping, monkeypatch, slots=1)
    Napping.played, Napping.naps = [], {}
    run = Run("1/0/0", counted=True)
    run.cut.set()
    future = role._submit(0, ts, ts.tasks[0], 0, run)
    with pytest.raises(TaskCut, match="given up on before a runner took it"):
        future.result(timeout=5)
    assert Napping.played == []
    role.pools[0].shutdown()


# over-rollout: a step's tasks left behind once enough of them have ended


def _ran(run: Run, release: threading.Event | None = None, result=("done",)):
    """A runner's work: it takes `run`, waits for `release` (none: ends at once), ends."""

    def work():
        run.begin(100)
        if release is not None:
            release.wait(5)
        run.end()
        return list(result)

    return work


def test_the_quorum_gives_the_others_their_grace_once_enough_tasks_have_ended_then_leaves_them_behind():
    timeouts = Timeouts(100, dynamic())
    runs = [Run(f"1/{i}/0", counted=True) for i in range(3)]
    release = threading.Event()
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(_ran(runs[0])), pool.submit(_ran(runs[1], release)), pool.submit(_ran(runs[2]))]
        quorum = Quorum([[(f, r)] for f, r in zip(futures, runs)], least=2, grace=0.3)
        assert wait(futures[0], runs[0], 100, timeouts, runs, quorum) == ["done"]
        assert wait(futures[2], runs[2], 100, timeouts, runs, quorum) == ["done"]
        assert quorum.deadline is not None  # 2 of 3 ended: the third has 0.3 s
        started = time.monotonic()
        with pytest.raises(TaskLeftBehind, match=r"task 1/1/0 was left behind 0.3 s after 2 tasks of its step ended"):
            wait(futures[1], runs[1], 100, timeouts, runs, quorum)
        assert time.monotonic() - started < 0.3 + 2 * runners.POLL_S
        assert runs[1].cut.is_set() and not runs[0].cut.is_set()  # its model client now refuses further calls
        release.set()
    assert timeouts.tasks == 2  # one left behind is not timed: it did not overrun, it was not waited for


def test_a_run_that_ended_before_the_grace_did_is_kept_even_when_it_is_waited_for_after():
    runs = [Run(f"1/{i}/0", counted=False) for i in range(2)]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(_ran(r)) for r in runs]
        quorum = Quorum([[(f, r)] for f, r in zip(futures, runs)], least=1, grace=0.1)
        time.sleep(0.3)  # both ended at once; the grace of 0.1 s after the first is over when they are waited for
        assert quorum.passed(time.monotonic())
        assert [wait(f, r, 100, Timeouts(100, dynamic()), runs, quorum) for f, r in zip(futures, runs)] == [
            ["done"],
            ["done"],
        ]


class Halves(Napping):
    """Of each task's two runs (explorer.max_repeat_times_per_runner 2 of 4 rollouts), the first to start naps 20 s."""

    started: dict = {}

    def run(self):
        with OneRollout.lock:
            first = self.task.uid not in self.started
            self.started[self.task.uid] = True
        self.naps = {self.task.uid: 20.0 if first and self.task.uid == self.slow else 0.05}
        return super().run()


@pytest.mark.parametrize("partial", [False, True])
def test_a_task_left_behind_gives_its_ended_runs_only_with_return_partial_tasks(explorer, monkeypatch, partial):
    role = explorer(
        "synchronizer.sync_style=explorer_driven",
        "explorer.over_rollout.ratio=0.5",
        "buffer.train_batch_size=4",  # what a step's quorum writes: 1 of its 2 tasks x 4
        "explorer.over_rollout.wait_after_min=0.2",
        f"explorer.over_rollout.return_partial_tasks={str(partial).lower()}",
        "explorer.max_repeat_times_per_runner=2",
        "explorer.max_retry_times=0",
        "algorithm.repeat_times=4",
        "buffer.batch_size=2",
    )
    ts = _looping(role, Halves, monkeypatch, slots=4)
    Halves.started, Halves.slow, Napping.played = {}, ts.tasks[1].uid, []
    started = time.monotonic()
    exps, failed, behind = role._run([(ts, t) for t in ts.tasks[:2]], "step 1", 1, over_rollout=True)
    assert time.monotonic() - started < 5  # not the 20 s nap
    assert (failed, behind) == (0, 1)
    kept = sorted(e.group for e in exps)
    assert kept == [ts.tasks[0].uid] * 4 + ([ts.tasks[1].uid] * 2 if partial else [])
    time.sleep(0.2)
    assert ("stopped", ts.tasks[1].uid) in Napping.played  # the left-behind run was cut: its runner is free
    # an evaluation, or a step without over_rollout, waits for every task
    Halves.started, Napping.played = {}, []
    Halves.slow = None
    exps, failed, behind = role._run([(ts, t) for t in ts.tasks[:2]], "step 2", 2)
    assert (len(exps), behind) == (8, 0)
    for pool in role.pools:
        pool.shutdown()
