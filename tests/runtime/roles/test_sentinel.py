"""A process's sentinel (roles/sentinel.py) writes into its log how the process ended, whoever ends it: the signal
(SIGKILL, SIGSEGV), or the exit code of an os._exit; a SIGKILL is said to come from the kernel's OOM killer only where
the kernel's log says it killed that process. Real processes, no Ray (tests/runtime/roles/test_base.py runs roles in
Ray actors)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trinity.runtime.roles import sentinel

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the sentinel needs pidfds (Linux 5.3+)")
REPO = Path(__file__).resolve().parents[3]


def watched(log: Path, then: str = "time.sleep(60)") -> subprocess.Popen:
    """A process that starts its sentinel (writing into `log`), says so on stdout, then runs `then`."""
    code = f"import faulthandler, os, time\nfrom trinity.runtime.roles import sentinel\nsentinel.start({str(log)!r})\n"
    code += f"print('watched', flush=True)\n{then}\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "watched\n"
    return proc


def ended(proc: subprocess.Popen, log: Path) -> tuple[str, float]:
    """How `proc` ended, as its sentinel wrote it (waited for before `proc` is reaped: on a kernel before 6.15 the
    sentinel reads the status from the zombie)."""
    deadline = time.monotonic() + 10
    while not (said := sentinel.ended(log.read_text().splitlines() if log.exists() else [], proc.pid)):
        assert time.monotonic() < deadline, "the sentinel wrote nothing"
        time.sleep(0.02)
    proc.wait(timeout=10)
    return said


@pytest.mark.parametrize("sig, how", [(signal.SIGKILL, "killed by SIGKILL"), (signal.SIGTERM, "killed by SIGTERM")])
def test_a_signal_from_outside_is_named(tmp_path, sig, how):
    log = tmp_path / "role.log"
    proc = watched(log)
    os.kill(proc.pid, sig)
    killed = time.time()
    said, at = ended(proc, log)
    assert said.startswith(how) and abs(at - killed) < 5
    assert log.read_text().splitlines()[-1].startswith(f"process {proc.pid} ended (trinity's sentinel, ")


def test_an_exit_code_is_named(tmp_path):
    log = tmp_path / "role.log"
    proc = watched(log, "time.sleep(0.2)\nos._exit(3)")
    assert ended(proc, log)[0] == "exited with code 3"


def test_a_crash_is_named_by_its_signal(tmp_path):
    log = tmp_path / "role.log"
    proc = watched(log, "faulthandler._sigsegv()")
    assert ended(proc, log)[0].startswith("killed by SIGSEGV")


def kmsg(*messages: str) -> str:
    """Records as /dev/kmsg gives them (`prio,seq,time,flags;message`, continuation lines indented)."""
    return "".join(f"6,{i},{i * 1000},-;{m}\n SUBSYSTEM=memory\n" for i, m in enumerate(messages))


def test_a_sigkill_from_the_kernels_oom_killer_is_said_to_be_one(tmp_path):
    kernel = tmp_path / "kmsg"
    killed = "Out of memory: Killed process 4242 (ray::Transforme) total-vm:9000kB, anon-rss:8000kB"
    kernel.write_text(kmsg("oom-kill:constraint=CONSTRAINT_NONE,task=ray::Transforme,pid=4242,uid=0", killed))
    status = signal.SIGKILL  # a wait status: killed by signal 9, no core
    assert sentinel.how(status, 4242, str(kernel)) == f"killed by SIGKILL from the kernel's OOM killer ({killed})"
    assert sentinel.how(status, 424, str(kernel)) == "killed by SIGKILL (not by the kernel's OOM killer)"
    assert sentinel.how(status, 4242, str(tmp_path / "unreadable")) == (
        "killed by SIGKILL (by the kernel's OOM killer or by a person: the kernel's log is not readable here)"
    )


def test_the_line_of_the_process_asked_is_read_back():
    lines = [
        "process 7 ended (trinity's sentinel, 1.500): exited with code 1",
        "2026-12-05 14:00:00 INFO an ordinary log line",
        "process 8 ended (trinity's sentinel, 2.250): killed by SIGKILL (not by the kernel's OOM killer)",
    ]
    assert sentinel.ended(lines, 8) == ("killed by SIGKILL (not by the kernel's OOM killer)", 2.25)
    assert sentinel.ended(lines, 7) == ("exited with code 1", 1.5)
    assert sentinel.ended(lines, 9) is None
    assert sentinel.how(None, 7) == "ended; its exit status was gone before it could be read"


def test_why_a_process_ended_itself_is_read_back_for_that_process():
    lines = [
        "2026-12-06 14:00:00 ERROR process 7 ends itself: its engine core died",
        "process 7 ended (trinity's sentinel, 1.500): exited with code 1",
    ]
    assert sentinel.ends_itself(lines, 7) == "its engine core died"
    assert sentinel.ends_itself(lines, 8) is None and sentinel.ends_itself(lines[1:], 7) is None
