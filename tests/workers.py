"""How many pytest-xdist workers `-n auto` starts (pyproject.toml's addopts; tests/conftest.py asks here).

Two, the concurrency the suite is measured and tested at (docs/testing.md): each worker runs its own session Ray,
`trinity run`s and vLLM engines. Fewer where this process has fewer cores or less memory than two workers take,
counted as a container limits them (CPU affinity, the cgroup's CPU quota and memory limit), not as the host has them.
None (0: the tests run in pytest's own process) where workers would only cost their start or stand in the way: one
worker, the tests of one file (a file runs whole on one worker), output not captured (`-s`), or `--trace`.
"""

import contextlib
import os
from pathlib import Path

WORKERS = 2
# a worker's heaviest moments (a real vLLM engine beside a `trinity run`) with headroom: two workers peaked at 7.2 GiB
WORKER_GIB = 8
ENV = "PYTEST_XDIST_AUTO_NUM_WORKERS"  # xdist's own override of `-n auto`, honoured here too
# cgroup v2, then v1: the CPU quota and period, and the memory limit, of the container this runs in
CPU_MAX = (Path("/sys/fs/cgroup/cpu.max"), Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"))
CPU_PERIOD_V1 = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
MEMORY_MAX = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def auto_workers(config) -> int:
    """The number of workers for `-n auto` in this session (`config`: pytest's)."""
    if ENV in os.environ:
        return int(os.environ[ENV])
    if config.option.capture == "no" or config.option.trace or _one_file(config.args):
        return 0
    workers = min(WORKERS, cores(), int(memory_gib() // WORKER_GIB))
    return workers if workers > 1 else 0


def _one_file(args: list[str]) -> bool:
    files = {arg.split("::")[0] for arg in args}
    return len(files) == 1 and next(iter(files)).endswith(".py")


def cores() -> int:
    """The cores this process may run on: its CPU affinity, within its cgroup's quota."""
    count = len(os.sched_getaffinity(0))
    quota = _cpu_quota()
    return max(1, min(count, int(quota))) if quota else count


def _cpu_quota() -> float | None:
    """The cgroup's CPU quota in cores, None where it has none ("max", -1) or none is found."""
    with contextlib.suppress(OSError, ValueError):
        quota, period = CPU_MAX[0].read_text().split()
        return int(quota) / int(period) if quota != "max" else None
    with contextlib.suppress(OSError, ValueError):
        quota = int(CPU_MAX[1].read_text())
        return quota / int(CPU_PERIOD_V1.read_text()) if quota > 0 else None
    return None


def memory_gib() -> float:
    """This process's memory: the machine's, or its cgroup's limit where lower ("max" or v1's huge number: none)."""
    limits = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    for path in MEMORY_MAX:
        with contextlib.suppress(OSError, ValueError):
            limits.append(int(path.read_text()))
    return min(limits) / 2**30
