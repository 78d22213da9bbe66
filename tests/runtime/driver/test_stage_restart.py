"""Which failures restart a stage from its last checkpoint (a trainer rank's or the buffer's crash, a device or a
collective failing under them, an engine or the explorer dead where it is not replaced in place) and which end the run
at once (an error of their own code that would recur, a failure that is no role's), and how a restart is recorded and
refused once the budget is spent: on failures made by hand. tests/cli/test_run_restarts.py kills the roles of a real
run."""

import json

import pytest

from trinity.runtime.driver.blame import Failure
from trinity.runtime.driver.restarts import RestartBudget, restart_budget
from trinity.runtime.driver.stage_restart import StageRestarts, Verdict, verdict
from trinity.runtime.driver.watcher import RoleFailed
from trinity.runtime.records.metrics import MetricsLog

ROLES = {
    "trainer_node0.rank0": "trainer",
    "trainer_node0.rank1": "trainer",
    "buffer": "buffer",
    "explorer": "explorer",
    "rollout.engine0": "rollout",
    "judge.engine0": "auxiliary",
}
RANK_KILLED = Failure("trainer_node0.rank1", True, "killed by SIGKILL (not by the kernel's OOM killer)", at=1.0)


@pytest.mark.parametrize(
    "cause",
    [
        RANK_KILLED,
        Failure("buffer", True, "exit code 1", at=1.0),
        Failure(
            "trainer_node0.rank0", True, "killed by SIGKILL from the kernel's OOM killer (Out of memory: ...)", 1.0
        ),
        Failure("trainer_node0.rank0", False, "RuntimeError: CUDA error: an illegal memory access was encountered", 1),
        Failure("trainer_node0.rank0", False, "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970", 1.0),
        Failure(
            "trainer_node0.rank1",
            False,
            "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer",
            1,
        ),
        Failure(
            "trainer_node0.rank0",
            False,
            "RuntimeError: NPU function error: aclrtSynchronizeStream, error code 507035",
            1,
        ),
        Failure("trainer_node0.rank0", False, "RuntimeError: CUDA error: uncorrectable ECC error encountered", 1.0),
    ],
    ids=["rank-killed", "buffer-exited", "oom-killer", "cuda-fault", "nccl", "gloo-peer", "npu-fault", "ecc"],
)
def test_a_crash_of_a_trainer_rank_or_the_buffer_restarts_the_stage(cause):
    assert verdict(cause, ROLES).restart


@pytest.mark.parametrize(
    "cause",
    [
        Failure("trainer_node0.rank0", False, "ValueError: reward function returned None", 1.0),
        Failure("buffer", False, "TimeoutError: the buffer had fewer than 16 experiences for train step 3", 1.0),
        Failure("trainer_node0.rank0", False, "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 1.0),
        Failure("trainer_node0.rank0", False, "RuntimeError: CUDA error: device-side assert triggered", 1.0),
        Failure("trainer_node0.rank0", False, "ConfigError: algorithm.optimizer.lr must be > 0", 1.0),
    ],
    ids=["user-code", "buffer-timeout", "device-oom", "device-assert", "config"],
)
def test_an_error_of_the_roles_own_ends_the_run_and_says_why(cause):
    judged = verdict(cause, ROLES)
    assert not judged.restart and "not a crash" in judged.why and cause.role in judged.why


@pytest.mark.parametrize("role", ["rollout.engine0", "explorer", "judge.engine0"])
def test_an_engine_or_the_explorer_dead_and_not_replaced_in_place_restarts_a_stage_that_trains(role):
    """The failure reaches the stage only where replace.py did not replace the role in place (colocate, an engine
    spanning nodes, an auxiliary model's engine, a replacement that failed); a stage that only explores has no
    checkpoint to go on from."""
    died = Failure(role, True, "killed by SIGKILL", at=1.0)
    assert verdict(died, ROLES).restart and not verdict(died, ROLES, trains=False).restart
    assert verdict(Failure(role, False, "ValueError: a reward raised", at=1.0), ROLES) == Verdict(False)


@pytest.mark.parametrize(
    "cause",
    [
        Failure(None, False, "RayError: a role actor failed to start", at=1.0),
        None,  # a misplaced actor: no role's failure
    ],
    ids=["no-role", "misplaced"],
)
def test_a_failure_that_is_no_roles_is_not_the_stages_to_restart(cause):
    assert verdict(cause, ROLES) == Verdict(False)  # no note: its own failure, as before


def failed(*failures: Failure) -> RoleFailed:
    return RoleFailed.of(list(failures))


def restarts(tmp_path, most: int) -> StageRestarts:
    return StageRestarts(RestartBudget(most, 3600.0), MetricsLog(tmp_path / "metrics.jsonl"), "grpo", "grpo")


def records(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]


def test_a_restart_is_recorded_in_the_metrics_and_said_on_stderr(tmp_path, capsys):
    stage = restarts(tmp_path, 3)
    lost = Failure("trainer_node0.rank0", False, "RuntimeError: gloo: Connection closed by peer", at=1.2)
    assert stage.after(failed(lost, RANK_KILLED), ROLES, 407, "global_step_406") is None
    assert stage.count == 1 and [r.role for r in stage.budget.restarts] == ["trainer_node0.rank1"]
    (line,) = records(tmp_path)
    assert {k: line[k] for k in ("step", "role", "stage", "cause_role", "attempt", "from_checkpoint")} == {
        "step": 407,
        "role": "restart",
        "stage": "grpo",
        "cause_role": "trainer_node0.rank1",  # the rank that died, not its peer
        "attempt": 1,
        "from_checkpoint": "global_step_406",
    }
    assert line["cause"] == "trainer_node0.rank1 died: killed by SIGKILL (not by the kernel's OOM killer)"
    assert capsys.readouterr().err == (
        "restarting stage grpo from checkpoint global_step_406 after trainer_node0.rank1 died: killed by SIGKILL "
        "(not by the kernel's OOM killer) (restart 1 of 3)\n"
    )
    assert stage.after(failed(RANK_KILLED), ROLES, 3, None) is None
    assert "from its start (no complete checkpoint yet)" in capsys.readouterr().err


def test_once_the_budget_is_spent_the_failure_ends_the_run_saying_so(tmp_path):
    stage = restarts(tmp_path, 1)
    assert stage.after(failed(RANK_KILLED), ROLES, 5, "global_step_4") is None
    ended = stage.after(failed(RANK_KILLED), ROLES, 9, "global_step_8")
    first, second, *_ = str(ended).splitlines()
    assert first == RANK_KILLED.headline  # the cause still comes first
    assert second == (
        "not restarted: the restart budget is spent (1 restarts within fault_tolerance.restart_window_s=3600 s already)"
    )
    assert ended.record()["cause"] == RANK_KILLED.headline and "budget is spent" in ended.record()["not_restarted"]
    assert stage.count == 1 and len(records(tmp_path)) == 1  # the refused one is no restart


def test_no_restarts_allowed_is_the_fail_stop_of_before(tmp_path):
    stage = restarts(tmp_path, 0)
    original = failed(RANK_KILLED)
    assert stage.after(original, ROLES, 5, None) is original  # the same failure, worded as before
    assert "not_restarted" not in original.record() and not (tmp_path / "metrics.jsonl").read_text()


def test_a_failure_that_already_says_why_it_was_not_restarted_spends_nothing(tmp_path):
    """An engine whose replacement found the budget spent (replace.py grant) is not restarted by the stage either."""
    stage = restarts(tmp_path, 3)
    spent = failed(Failure("rollout.engine0", True, "killed by SIGKILL", at=1.0)).refused("the restart budget is spent")
    assert stage.after(spent, ROLES, 5, None) is spent and stage.budget.restarts == []


def test_an_error_that_would_recur_spends_nothing(tmp_path):
    stage = restarts(tmp_path, 3)
    ended = stage.after(failed(Failure("buffer", False, "KeyError: 'reward'", at=1.0)), ROLES, 2, None)
    assert str(ended).splitlines()[1].startswith("not restarted: buffer raised an error of its own (KeyError)")
    assert stage.budget.restarts == [] and stage.count == 0


@pytest.mark.parametrize(("mode", "trains"), [("both", True), ("colocate", True), ("train", True), ("explore", False)])
def test_a_stages_restarts_know_whether_its_mode_trains(tmp_path, mode, trains):
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve

    config = resolve(Request(None, ("hardware=cpu", "~stages", f"mode={mode}"))).config
    stage = StageRestarts.of(RestartBudget(3, 3600.0), MetricsLog(tmp_path / "metrics.jsonl"), None, config)
    assert (stage.trains, stage.shown) == (trains, "run")


def test_the_runs_budget_comes_from_its_fault_tolerance_section():
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve

    config = resolve(Request(None, ("hardware=cpu", "fault_tolerance.max_restarts=2"))).config
    budget = restart_budget(config)
    assert (budget.most, budget.window_s) == (2, 3600.0)
