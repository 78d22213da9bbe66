"""A role actor's log in the run directory holds its cause, on a real Ray: the traceback of what a method raised
(sync or async, logged once, also after a restage), what its process wrote to stderr before it died hard, and the
threads' stacks on a fatal signal; the RoleFailed the driver raises names the role, the cause and the log. A role
built outside an actor (a test's) leaves its process's stderr alone."""

import faulthandler
import logging
import os
import re
import sys

import pytest

from trinity.config.schema.log import LEVELS
from trinity.runtime.driver.watcher import RayWatcher, RoleFailed
from trinity.runtime.roles.base import Role

ray = pytest.importorskip("ray")
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # a worker cannot import this module (no package)

NAME = "trainer_node0.rank0"
CUDA_ASSERT = (
    "CUDA error: device-side assert triggered\n"
    "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more"
    " information.\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be"
    " incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


class AcceleratorError(RuntimeError):
    """torch's name for a device error, without importing torch."""


class Faulty(Role):
    def check_kernel(self) -> None:
        raise AcceleratorError(CUDA_ASSERT)

    async def generate(self) -> None:
        raise ValueError("the engine's own error")

    def step(self) -> None:
        self.check_kernel()  # a role method calling another: the outer one logs

    def configure_logging(self) -> None:
        logging.basicConfig()  # as a library may: a root handler on stderr

    def say(self, line: str) -> None:
        os.write(2, line.encode() + b"\n")

    def die(self) -> None:
        os.write(2, b"".join(b"loading shard %d\n" % i for i in range(6)) + b"\ndevice says: out of memory\n")
        os._exit(1)

    def crash(self) -> None:
        faulthandler._sigsegv()

    def give_up(self) -> None:
        from trinity.runtime.roles import sentinel

        sentinel.end_itself(self.log, "its engine core died")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _temp_dir=str(tmp_path_factory.mktemp("r")))
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def role(session, tmp_path):
    """A Faulty role actor logging into tmp_path/logs, its watcher, and its log file."""
    identity = {"name": NAME, "role": "trainer", "log_dir": str(tmp_path / "logs")}
    actor = ray.remote(Faulty).options(num_cpus=0).remote(**identity)
    ray.get(actor.report.remote())  # constructed: its stderr goes to its log from now on
    yield actor, RayWatcher({NAME: actor}, tmp_path / "logs"), tmp_path / "logs" / f"{NAME}.log", identity
    ray.kill(actor)


@pytest.mark.ray
def test_a_method_that_raises_leaves_its_traceback_in_the_log_and_the_cause_in_the_error(role):
    actor, watcher, log, _ = role
    with pytest.raises(AcceleratorError) as raised:
        ray.get(actor.check_kernel.remote())
    assert type(raised.value.cause) is AcceleratorError and str(raised.value.cause) == CUDA_ASSERT  # unchanged
    with pytest.raises(RoleFailed) as failed:
        watcher.wait([actor.check_kernel.remote()])
    assert str(failed.value) == (
        f"{NAME} failed: AcceleratorError: CUDA error: device-side assert triggered\n  traceback: {log}"
    )
    text = log.read_text()
    assert text.count("Traceback (most recent call last)") == 2  # one per call
    assert re.search(r"ERROR Faulty\.check_kernel raised\nTraceback .*\n.*, in check_kernel\n", text, re.DOTALL)
    assert "Compile with `TORCH_USE_CUDA_DSA`" in text  # the log has the whole message


@pytest.mark.ray
def test_an_async_method_that_raises_is_logged_too(role):
    actor, watcher, log, _ = role
    with pytest.raises(RoleFailed, match=f"^{re.escape(NAME)} failed: ValueError: the engine's own error\n"):
        watcher.wait([actor.generate.remote()])
    assert re.search(
        r"Faulty\.generate raised\n.*, in generate\n.*ValueError: the engine's own error", log.read_text(), re.DOTALL
    )


@pytest.mark.ray
def test_a_kept_role_logs_each_failure_once(role, tmp_path):
    actor, _, log, identity = role
    ray.get(actor.configure_logging.remote())
    for log_dir in (identity["log_dir"], str(tmp_path / "next")):  # a kept role writes on where it started
        assert ray.get(actor.restage.remote(**{**identity, "log_dir": log_dir})) is True
    ray.get(actor.say.remote("said once"))
    with pytest.raises(AcceleratorError):
        ray.get(actor.step.remote())
    text = log.read_text()
    assert text.count("said once") == 1 and text.count(" raised\n") == 1 and "Faulty.step raised" in text
    assert text.count("Traceback (most recent call last)") == 1 and not (tmp_path / "next").exists()


def test_a_role_built_outside_an_actor_leaves_the_process_stderr_alone(tmp_path):
    before = os.fstat(2)
    role = Faulty(name="in_process", role="trainer", log_dir=str(tmp_path / "logs"))
    after = os.fstat(2)
    (handler,) = role.log.handlers  # the logger outlives the test
    handler.close()
    role.log.removeHandler(handler)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    assert (tmp_path / "logs" / "in_process.log").read_text() == ""


@pytest.mark.parametrize("level", LEVELS)
def test_a_role_logs_at_log_level_in_its_nodes_folder_with_group_by_node(tmp_path, level):
    from trinity.runtime.roles.base import found_log, node_ip

    role = Faulty(name="by_node", role="trainer", log_dir=str(tmp_path / "logs"), log_level=level, log_by_node=True)
    for name in LEVELS:
        role.log.log(getattr(logging, name), "said at %s", name)
    (handler,) = role.log.handlers
    handler.close()
    role.log.removeHandler(handler)
    log = tmp_path / "logs" / node_ip() / "by_node.log"  # Trinity-RFT's <log dir>/<node IP>/
    said = [name for name in LEVELS if f"said at {name}" in log.read_text()]
    assert said == list(LEVELS[LEVELS.index(level) :])  # its level and above
    assert found_log(tmp_path / "logs", "by_node") == log  # where the driver shows a failed role's log
    assert found_log(tmp_path / "logs", "other") == tmp_path / "logs" / "other.log"


@pytest.mark.ray
def test_a_role_that_dies_hard_shows_what_it_wrote_to_stderr(role):
    actor, watcher, log, _ = role
    with pytest.raises(RoleFailed) as failed:
        watcher.wait([actor.die.remote()])
    shards = "".join(f"    loading shard {i}\n" for i in range(2, 6))  # its last lines but the blank one
    assert str(failed.value) == (  # how it ended, as its sentinel saw it; its log's last words below
        f"{NAME} died: exited with code 1\n  its log ends:\n{shards}    device says: out of memory\n  log: {log}"
    )
    *said, ended = log.read_text().splitlines()
    assert said[-3:] == ["loading shard 5", "", "device says: out of memory"]
    assert re.fullmatch(r"process \d+ ended \(trinity's sentinel, [\d.]+\): exited with code 1", ended)


@pytest.mark.ray
def test_a_role_that_ends_itself_is_named_with_why_it_did(role):
    actor, watcher, log, _ = role
    with pytest.raises(RoleFailed) as failed:
        watcher.wait([actor.give_up.remote()])
    assert str(failed.value).startswith(f"{NAME} died: exited with code 1 (it ended itself: its engine core died)\n")


@pytest.mark.ray
def test_a_fatal_signal_leaves_the_threads_stacks_in_the_log_and_its_first_line_in_the_error(role):
    actor, watcher, log, _ = role
    with pytest.raises(RoleFailed) as failed:
        watcher.wait([actor.crash.remote()])
    shown = str(failed.value)
    assert shown.startswith(f"{NAME} died: killed by SIGSEGV")  # as its sentinel saw it end
    assert "\n    Fatal Python error: Segmentation fault\n  log: " in shown and "SIGSEGV received" in shown
    assert 'File "' not in shown and "@ " not in shown and len(shown.splitlines()) <= 15  # the stacks stay in the log
    assert re.search(r"Fatal Python error: Segmentation fault\n.*, line \d+ in crash\n", log.read_text(), re.DOTALL)


class Where(Role):
    def cwd(self) -> str:
        return os.getcwd()


@pytest.mark.ray
@pytest.mark.parametrize("there", [True, False])
def test_a_role_works_in_the_folder_trinity_runs_in_or_logs_where_it_reads_instead(session, tmp_path, there):
    """A cluster the run joined starts its workers elsewhere: the role moves to `workdir`, where the config's relative
    paths point; a node without that folder keeps Ray's and says so in the role's log."""
    workdir = tmp_path / "work"
    if there:
        workdir.mkdir()
    identity = {"name": NAME, "role": "trainer", "log_dir": str(tmp_path / "logs"), "workdir": str(workdir)}
    actor = ray.remote(Where).options(num_cpus=0).remote(**identity)
    try:
        cwd = ray.get(actor.cwd.remote())
    finally:
        ray.kill(actor)
    log = (tmp_path / "logs" / f"{NAME}.log").read_text()
    if there:
        assert cwd == str(workdir) and "relative paths" not in log
    else:
        assert cwd != str(workdir) and f"relative paths are read from {cwd}: the folder trinity runs in" in log
