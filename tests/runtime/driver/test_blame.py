"""Which failure of a stage is the cause (blame.py), on failure records made by hand: a death before a role's own
error, an error of a role's own before one that says it lost a peer, the earlier before the later within each, one
record per role; the words the user reads and the run's records agree. tests/cli/test_run_blame.py kills roles of a
real run."""

import pytest

from trinity.runtime.driver.blame import DIED, LOST_PEER, RAISED, Failure, message, ordered, record

GLOO = (
    "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[127.0.0.1]:44183. This is typically caused by a remote worker crashing."
)
ENGINE_KILLED = Failure("rollout.engine0", True, "killed by SIGKILL", at=100.0, more=("  log: engine.log",))
RANK_LOST_IT = Failure("trainer_node0.rank0", False, GLOO, at=99.5, log="rank0.log")  # seen first


def names(failures: list[Failure]) -> list[str | None]:
    return [f.role for f in ordered(failures)]


def test_a_death_is_the_cause_though_a_peer_that_lost_it_was_seen_first():
    assert names([RANK_LOST_IT, ENGINE_KILLED]) == ["rollout.engine0", "trainer_node0.rank0"]
    assert message([RANK_LOST_IT, ENGINE_KILLED]).splitlines() == [
        "rollout.engine0 died: killed by SIGKILL",
        "  log: engine.log",
        f"then: trainer_node0.rank0 failed: {GLOO}",
        "  log: rank0.log",
    ]


def test_a_death_comes_before_an_error_of_a_roles_own_seen_earlier():
    own = Failure("explorer", False, "ValueError: a workflow's own bug", at=1.0)
    assert names([own, ENGINE_KILLED]) == ["rollout.engine0", "explorer"]


def test_an_error_of_a_roles_own_comes_before_one_that_lost_its_peer():
    lost = Failure("trainer_node0.rank1", False, "RuntimeError: Connection reset by peer", at=1.0)
    own = Failure("trainer_node0.rank0", False, "AcceleratorError: CUDA error: out of memory", at=2.0)
    assert names([lost, own]) == ["trainer_node0.rank0", "trainer_node0.rank1"]


def test_of_two_deaths_the_earlier_one_is_the_cause_whichever_was_seen_first():
    # an NCCL watchdog aborts rank 0 after the engine it broadcast to was killed: the abort is seen first
    aborted = Failure("trainer_node0.rank0", True, "killed by SIGABRT (core dumped)", at=100.4)
    assert names([aborted, ENGINE_KILLED]) == ["rollout.engine0", "trainer_node0.rank0"]
    assert names([ENGINE_KILLED, aborted]) == ["rollout.engine0", "trainer_node0.rank0"]


def test_of_two_errors_of_the_same_kind_the_earlier_one_is_the_cause():
    first = Failure("explorer", False, "ValueError: first", at=1.0)
    second = Failure("buffer", False, "KeyError: 'second'", at=2.0)
    assert names([second, first]) == ["explorer", "buffer"]


def test_each_role_is_named_once_by_its_first_failure_in_that_order():
    raised = Failure("rollout.engine0", False, "RuntimeError: Broken pipe", at=99.0)
    unnamed = Failure(None, False, "RuntimeError: no actor's", at=101.0)
    other = Failure(None, False, "RuntimeError: another", at=102.0)
    found = ordered([raised, ENGINE_KILLED, unnamed, unnamed, other])
    assert found == [ENGINE_KILLED, unnamed, other]  # unnamed: one per error
    assert message(found).splitlines()[-2:] == [
        "then: a role failed: RuntimeError: no actor's",
        "then: a role failed: RuntimeError: another",
    ]


def test_the_runs_record_says_what_the_user_reads():
    explorer = Failure("explorer", False, "RayActorError: The actor died unexpectedly", at=100.2, log="explorer.log")
    shown = message([RANK_LOST_IT, explorer, ENGINE_KILLED]).splitlines()
    kept = record([RANK_LOST_IT, explorer, ENGINE_KILLED])
    assert kept == {
        "cause": "rollout.engine0 died: killed by SIGKILL",
        "cause_role": "rollout.engine0",
        "died": True,
        "how": "killed by SIGKILL",
        "then": [f"trainer_node0.rank0 failed: {GLOO}", "explorer failed: RayActorError: The actor died unexpectedly"],
    }
    assert shown[0] == kept["cause"] and [line for line in shown if line.startswith("then: ")] == [
        f"then: {line}" for line in kept["then"]
    ]


def test_the_causes_own_lines_are_cut_and_the_consequences_still_shown():
    long = Failure("rollout.engine0", True, "killed by SIGKILL", at=1.0, more=tuple(f"  line {i}" for i in range(30)))
    lines = message([RANK_LOST_IT, long]).splitlines()
    assert len(lines) == 1 + 8 + 2 and lines[-2].startswith("then: trainer_node0.rank0 failed")


@pytest.mark.parametrize(
    "error",
    [
        GLOO,
        "DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or a network error",
        "RuntimeError: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting.",
        "RuntimeError: HCCL function error: HcclBroadcast(...), error code is 7",
        "ConnectionResetError: [Errno 104] Connection reset by peer",
        "BrokenPipeError: [Errno 32] Broken pipe",
        "ConnectionRefusedError: [Errno 111] Connection refused",
        "RemoteProtocolError: Server disconnected without sending a response.",
        "ConnectError: All connection attempts failed",
        "ActorDiedError: The actor died unexpectedly before finishing this task.",
        "RayActorError: The actor died because of an error raised in its creation task",
        "ActorUnavailableError: The actor is unavailable",
        "EOFError: Ran out of input",
    ],
)
def test_an_error_that_says_it_lost_a_peer_is_a_consequence(error):
    assert Failure("r", False, error, at=0.0).rank == LOST_PEER


@pytest.mark.parametrize(
    "error",
    [
        "AcceleratorError: CUDA error: out of memory",
        "AcceleratorError: CUDA error: device-side assert triggered",
        "ValueError: the role's own error",
        "KeyError: 'input_ids'",
        "RuntimeError: The Inner error is reported as above. The process exits for this inner error",
    ],
)
def test_an_error_of_a_roles_own_is_a_cause(error):
    assert Failure("r", False, error, at=0.0).rank == RAISED


def test_a_death_is_a_death_whatever_it_says():
    assert Failure("r", True, "Worker unexpectedly exits with a connection error code 2.", at=0.0).rank == DIED
