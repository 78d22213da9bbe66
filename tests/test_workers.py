"""`-n auto`'s workers (tests/workers.py): two where the cores and memory allow, as a container limits them; none where
workers would only cost their start."""

import os
from types import SimpleNamespace

import pytest

from tests import workers

SUITE = ["tests"]


def config(args=SUITE, capture="fd", trace=False):
    return SimpleNamespace(args=args, option=SimpleNamespace(capture=capture, trace=trace))


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """`machine(cores, gib, cpu_max=None, memory_max=None)`: this process's affinity and memory, and the cgroup v2
    files (absent where None; the v1 ones are absent)."""
    monkeypatch.delenv(workers.ENV, raising=False)
    v2 = (tmp_path / "cpu.max", tmp_path / "memory.max")
    monkeypatch.setattr(workers, "CPU_MAX", (v2[0], tmp_path / "v1-quota"))
    monkeypatch.setattr(workers, "MEMORY_MAX", (v2[1], tmp_path / "v1-limit"))
    monkeypatch.setattr(workers, "CPU_PERIOD_V1", tmp_path / "v1-period")

    def set_up(cores, gib, cpu_max=None, memory_max=None):
        page = 4096
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
        monkeypatch.setattr(os, "sysconf", {"SC_PAGE_SIZE": page, "SC_PHYS_PAGES": int(gib * 2**30 / page)}.get)
        for path, text in zip(v2, (cpu_max, memory_max)):
            if text is not None:
                path.write_text(text)

    return set_up


@pytest.mark.parametrize(
    ("cores", "gib", "expected"),
    [(2, 24, 2), (64, 512, 2), (1, 24, 0), (2, 15.9, 0), (2, 16, 2), (8, 4, 0)],
)
def test_two_workers_where_two_cores_and_two_workers_memory_are_there_else_none(machine, cores, gib, expected):
    machine(cores, gib)
    assert workers.auto_workers(config()) == expected


@pytest.mark.parametrize(
    ("cpu_max", "memory_max", "expected"),
    [("max 100000", "max", 2), ("100000 100000", None, 0), ("250000 100000", None, 2), (None, str(8 * 2**30), 0)],
)
def test_a_containers_cpu_quota_and_memory_limit_count_not_the_hosts(machine, cpu_max, memory_max, expected):
    machine(64, 512, cpu_max, memory_max)
    assert workers.auto_workers(config()) == expected


def test_cgroup_v1_limits_count_too(machine, tmp_path):
    machine(64, 512)
    (tmp_path / "v1-quota").write_text("100000\n")
    (tmp_path / "v1-period").write_text("100000\n")
    assert workers.cores() == 1
    (tmp_path / "v1-quota").write_text("-1\n")
    (tmp_path / "v1-limit").write_text(f"{4 * 2**30}\n")
    assert (workers.cores(), workers.memory_gib()) == (64, 4)


@pytest.mark.parametrize(
    "session",
    [
        config(["tests/cli/test_run.py"]),
        config(["tests/cli/test_run.py::test_a", "tests/cli/test_run.py::test_b"]),
        config(capture="no"),
        config(trace=True),
    ],
)
def test_one_files_tests_no_capture_or_trace_run_in_pytests_own_process(machine, session):
    machine(16, 128)
    assert workers.auto_workers(session) == 0


def test_two_files_or_a_folder_take_workers_and_the_override_wins(machine, monkeypatch):
    machine(16, 128)
    assert workers.auto_workers(config(["tests/cli/test_run.py", "tests/test_workers.py"])) == 2
    assert workers.auto_workers(config(["tests/cli"])) == 2
    monkeypatch.setenv(workers.ENV, "3")
    assert workers.auto_workers(config()) == 3
