"""The driver's Ray connection (trinity/launch/launcher.py), in a fresh driver process as `trinity run` makes it, and
the serialization it gives the run's processes (trinity/launch/serialization.py)."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.ray

DRIVER = """
import sys
{before}
import ray
from trinity.config.run_target import RunTarget
from trinity.launch.launcher import start_local

start_local(RunTarget(None, "test", "t", "CPU", "cpu", "test", 1, False), 1)
@ray.remote
class Role:
    def __init__(self, config):
        self.config = config

    def ask(self, value):
        import sys
        return {{"value": value, "config": self.config, "pyarrow": "pyarrow" in sys.modules}}

role = Role.options(runtime_env={{"env_vars": {{"ROLE_ENV": "1"}}}}).remote({{"lr": 0.1}})
answer = ray.get(role.ask.remote([1, 2]))
held = "pyarrow" in sys.modules
import pyarrow
print(answer, held, pyarrow.Table.from_pydict({{"x": [1]}}).num_rows)
ray.shutdown()
"""


@pytest.mark.parametrize("before,held", [("", False), ("import pyarrow", True)])
def test_the_run_serializes_without_arrow_unless_a_process_already_holds_pyarrow(tmp_path, before, held):
    """Ray's Arrow serializers import pyarrow (~35 MiB) on a process's first serialization; no role sends tables. A
    role actor (with a runtime_env of its own) and the driver hold no pyarrow after calls both ways; pyarrow still
    imports afterwards, and a driver that held it before Ray keeps it."""
    code = DRIVER.format(before=before)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    role = {"value": [1, 2], "config": {"lr": 0.1}, "pyarrow": False}
    assert proc.stdout.split("\n")[-2] == f"{role} {held} 1"
