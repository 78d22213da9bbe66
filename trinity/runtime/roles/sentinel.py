"""How a role's process ended, written into its log by a small process of its own (the sentinel), for the driver to
name the signal or exit code of a role that died.

Ray does not say: a process killed by SIGKILL, by the kernel's OOM killer or by a segfault, and one that called
os._exit(1), all read "Worker unexpectedly exits with a connection error code 2. End of file". Only the process's
parent (Ray's raylet) learns its wait status, and it keeps it to itself. But a pidfd of the process (Linux 5.3),
opened by the process itself as it starts, becomes readable as it ends, and then tells its status: since Linux 6.15
the kernel keeps it with the pidfd once the parent has reaped the process (ioctl PIDFD_GET_INFO); on older kernels the
process's zombie holds it until then (/proc/<pid>/stat, field 52), which the sentinel reads if it is quicker than the
raylet (else it says the status was gone). It then appends one line (`ENDED`) to the role's log: the signal (with the
kernel's OOM killer named where the kernel's log says it killed that process, or said to be unknown where that log is
not readable) or the exit code, and the time.

The sentinel runs as a script (`python -I -S sentinel.py PID LOG PIDFD`, the pidfd its role opened and handed it),
importing nothing of trinity, in a session of its own: the raylet's SIGTERM to the dead worker's process group does
not reach it before it has written its line. A role starts it once per process (roles/base.py) and waits until it
watches; the driver reads the line back with `ended`.
"""

import os
import re
import select
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from subprocess import Popen

# the line the sentinel writes, and the driver reads back
ENDED = "process {pid} ended (trinity's sentinel, {at:.3f}): {how}"
ENDED_LINE = re.compile(r"^process (\d+) ended \(trinity's sentinel, ([\d.]+)\): (.+)$")
# the line a role writes as it ends its own process (end_itself), which the driver adds to the death's cause
ENDS_ITSELF = "process {pid} ends itself: {why}"
ENDS_ITSELF_LINE = re.compile(r"process (\d+) ends itself: (.+)$")
EXIT_CODE_FIELD = 52  # of /proc/<pid>/stat: the wait status (proc(5))
# linux/pidfd.h: ioctl PIDFD_GET_INFO = _IOWR(0xFF, 11, struct pidfd_info) of its first version's size
PIDFD_INFO_SIZE, PIDFD_INFO_EXIT = 64, 1 << 3
PIDFD_GET_INFO = (3 << 30) | (PIDFD_INFO_SIZE << 16) | (0xFF << 8) | 11
KERNEL_LOG = "/dev/kmsg"


def start(log: str, ready_s: float = 5.0) -> "Popen | None":
    """Start the sentinel of this process, writing into `log`, and wait (at most `ready_s`) until it watches: a process
    that ends sooner would end unseen. None where this system has no pidfd (not Linux 5.3+) or no process to spare:
    the driver then says what Ray says."""
    import subprocess

    try:
        pidfd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):  # not Linux 5.3+
        return None
    try:
        watcher = subprocess.Popen(
            [sys.executable, "-I", "-S", __file__, str(os.getpid()), str(log), str(pidfd)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            pass_fds=(pidfd,),
            start_new_session=True,
        )
    except OSError:  # no process to spare: the role runs on, unwatched
        return None
    finally:
        os.close(pidfd)
    if select.select([watcher.stdout], [], [], ready_s)[0]:
        watcher.stdout.read(1)
    watcher.stdout.close()
    return watcher


def ended(lines: list[str], pid: int) -> tuple[str, float] | None:
    """(how, when) process `pid` ended, as its sentinel wrote it among `lines` (a log's); None where it wrote none."""
    for line in reversed(lines):
        found = ENDED_LINE.match(line.strip())
        if found and int(found.group(1)) == pid:
            return found.group(3), float(found.group(2))
    return None


def end_itself(log: Any, why: str) -> None:
    """End this process at once (exit code 1) from a state it cannot go on from, saying `why` in its log (`log`: the
    role's logger) for the driver to name in the cause: the exit code alone says nothing."""
    log.error(ENDS_ITSELF.format(pid=os.getpid(), why=why))
    for handler in log.handlers:
        handler.flush()
    os._exit(1)


def ends_itself(lines: list[str], pid: int) -> str | None:
    """Why process `pid` ended itself, as it wrote among `lines` (a log's); None where it did not say."""
    for line in reversed(lines):
        found = ENDS_ITSELF_LINE.search(line.strip())
        if found and int(found.group(1)) == pid:
            return found.group(2)
    return None


def how(status: int | None, pid: int, kernel_log: str = KERNEL_LOG) -> str:
    """Words for wait status `status` of process `pid` (None: gone before it was read)."""
    if status is None:
        return "ended; its exit status was gone before it could be read"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    number = os.WTERMSIG(status)
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    dumped = " (core dumped)" if os.WCOREDUMP(status) else ""
    return f"killed by {name}{dumped}" + (_oom(pid, kernel_log) if number == signal.SIGKILL else "")


def _oom(pid: int, kernel_log: str) -> str:
    """Whether the kernel's OOM killer sent process `pid` its SIGKILL: the kernel logs each process it kills."""
    try:
        killed = _kernel_lines(kernel_log)
    except OSError:
        return " (by the kernel's OOM killer or by a person: the kernel's log is not readable here)"
    said = [line for line in killed if re.search(rf"Killed process {pid} \(|oom-kill:.*[:,]pid={pid},", line)]
    return f" from the kernel's OOM killer ({said[-1].strip()})" if said else " (not by the kernel's OOM killer)"


def _kernel_lines(path: str) -> list[str]:
    """The messages of the kernel's ring buffer (/dev/kmsg: a record `prio,seq,time,flags;message` per read, its
    continuation lines indented; a file of such records reads alike)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    lines = []
    try:
        while True:
            try:
                records = os.read(fd, 8192).decode(errors="replace")
            except BlockingIOError:  # the newest record read
                return lines
            except BrokenPipeError:  # a record overwritten while read: go on with the next
                continue
            if not records:
                return lines
            lines += [line.partition(";")[2] for line in records.splitlines() if not line.startswith(" ")]
    finally:
        os.close(fd)


def _exit_status(pid: int, pidfd: int, wait_s: float = 1.0) -> int | None:
    """The wait status process `pid` (`pidfd`) left: from its pidfd once it is reaped (Linux 6.15+), else from its
    zombie until its parent reaps it; None where neither says within `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        status = _from_pidfd(pidfd)
        status = _from_zombie(pid) if status is None else status
        if status is not None or time.monotonic() >= deadline:
            return status
        time.sleep(0.005)


def _from_pidfd(pidfd: int) -> int | None:
    """The exit status the kernel keeps with a pidfd of a reaped process (ioctl PIDFD_GET_INFO, PIDFD_INFO_EXIT: Linux
    6.15); None before the reaping, or on an older kernel."""
    import fcntl
    import struct

    info = bytearray(PIDFD_INFO_SIZE)  # struct pidfd_info, its first version: mask first, exit_code at 60
    struct.pack_into("<Q", info, 0, PIDFD_INFO_EXIT)
    try:
        fcntl.ioctl(pidfd, PIDFD_GET_INFO, info, True)
    except OSError:
        return None
    if not struct.unpack_from("<Q", info, 0)[0] & PIDFD_INFO_EXIT:
        return None
    return struct.unpack_from("<i", info, 60)[0]


def _from_zombie(pid: int) -> int | None:
    """The wait status in process `pid`'s zombie (/proc/<pid>/stat); None once its parent has reaped it."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()  # after the name, which may hold spaces and parentheses
    except OSError:
        return None
    offset = 3  # fields[0] is field 3, the state
    if fields[0] not in ("Z", "X") or len(fields) <= EXIT_CODE_FIELD - offset:
        return None
    return int(fields[EXIT_CODE_FIELD - offset])


def watch(pid: int, log: str, pidfd: int) -> None:
    """Wait for process `pid` (`pidfd`: a pidfd of it) to end; append how it ended to `log`. Says it watches by one
    byte on stdout."""
    try:
        os.write(1, b".")
    except OSError:  # its role stopped waiting: it watches all the same
        pass
    select.select([pidfd], [], [])
    at = time.time()
    status = _exit_status(pid, pidfd)
    line = ENDED.format(pid=pid, at=at, how=how(status, pid)) + "\n"
    with open(log, "a") as out:
        out.write(line)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
