"""The test session's own Ray head (`ray start --head --block`), which its `trinity run`s join through RAY_ADDRESS.

Every port Ray would otherwise take at a fixed number (GCS 6379, the client server's 10001, the dashboard agent's
52365, ...) is a free one, so the simulated clusters other tests start (ray.cluster_utils.Cluster) and the local Rays
of runs that start their own come up beside it. Its temporary folder is its own: the tier guard (conftest.py) watches
the session's RAY_TMPDIR for Rays a fast test started. It ends with the test session, however that ends (the kernel
signals it when pytest's process is gone), and starts in the environment the session had before any test changed it.
"""

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PORTS = (
    "--port",
    "--ray-client-server-port",
    "--dashboard-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--metrics-export-port",
    "--runtime-env-agent-port",
    "--node-manager-port",
    "--object-manager-port",
)
CPUS = 16  # as many as the largest plan a test runs asks for (a local Ray has max(cores, the plan's))
START_S = 90
STARTED = "Ray runtime started"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports nothing listens on now, on any address."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _ends_with_parent() -> None:
    """In the child before it runs `ray start`: SIGTERM when the process that started it is gone (PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)


class SessionRay:
    """A Ray head in environment `env`, started on first `address()`, and again where it has ended; `stop()` ends it
    and its processes."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = {k: v for k, v in env.items() if k not in ("RAY_ADDRESS", "RAY_TMPDIR")}
        self.proc: subprocess.Popen | None = None
        self.folder = ""
        self.gcs = ""

    def address(self) -> str:
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            try:
                self._start()
            except RuntimeError:  # a port free when chosen was taken before Ray bound it (another test worker's Ray)
                self._start()  # once more, on ports chosen anew
        return self.gcs

    def _start(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="rs", dir="/tmp")  # short: Ray's socket paths must fit
        ports = free_ports(len(PORTS))
        command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block", f"--num-cpus={CPUS}"]
        command += [f"--temp-dir={self.folder}", "--include-dashboard=false", "--disable-usage-stats"]
        command += [f"{flag}={port}" for flag, port in zip(PORTS, ports)]
        log = Path(self.folder) / "start.log"
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.folder,
                start_new_session=True,
                preexec_fn=_ends_with_parent,
            )
        self.gcs = f"127.0.0.1:{ports[0]}"
        deadline = time.monotonic() + START_S
        while STARTED not in log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                text = log.read_text()
                self.stop()
                raise RuntimeError(f"the session's Ray did not start:\n{text[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)  # --block: `ray start` stops the node's processes, then exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=30)
            with contextlib.suppress(OSError):
                os.killpg(
                    self.proc.pid, signal.SIGKILL
                )  # what of its process group is left (its workers have their own)
            self.proc = None
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = ""


def role_processes(root: Path) -> list[int]:
    """The processes of the runs under `root`, this one aside: those whose stderr goes to a log there (a role actor
    writes into its log in the run directory, runtime/roles/base.py, and what it starts inherits that: vLLM's
    EngineCore) and those that work there (a `trinity run` started in it, and its roles), on whichever Ray they ran."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            places = (os.readlink(f"/proc/{pid}/fd/2"), os.readlink(f"/proc/{pid}/cwd") + os.sep)
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if int(pid) != os.getpid() and any(place.startswith(f"{root}{os.sep}") for place in places):
            found.append(int(pid))
    return sorted(found)


def assert_no_role_left(root: Path, wait_s: float = 15) -> None:
    """Nothing of a run under `root` is left running once it ended (the session's Ray outlives it): what is, is
    killed, and the test fails."""
    deadline = time.monotonic() + wait_s
    while (left := role_processes(root)) and time.monotonic() < deadline:
        time.sleep(0.5)
    titles = []
    for pid in left:
        with contextlib.suppress(OSError):
            titles.append(Path(f"/proc/{pid}/cmdline").read_bytes()[:80].replace(b"\0", b" ").decode(errors="replace"))
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of a run under {root} outlived it: {titles}"


def own_ray(env: dict) -> dict:
    """`env` for a run that starts a Ray of its own (cluster.ray_address=local), not the session's: one whose roles read
    the run's own environment (a module on its PYTHONPATH, a variable the test sets), or a test of that Ray's end."""
    return {k: v for k, v in env.items() if k != "RAY_ADDRESS"}
