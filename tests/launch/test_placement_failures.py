"""What `trinity run` says when placement fails, on a real Ray cluster (ray.cluster_utils.Cluster):
two simulated nodes with 8 NPU and 4 CPU each, and a head node with neither.

- The feasibility check names the resource that is short (here CPU, not NPU).
- A group that misses --timeout after the check said it fits (a second driver took the devices
  in between) is removed, the explanation printed, exit 2.
"""

import subprocess
import sys

import pytest
import ray
from ray.util import placement_group_table

from tests.conftest import MINIMAL, ray_cluster
from trinity.launch.launcher import Launch

pytestmark = pytest.mark.ray

# A second driver: holds both nodes whole until its stdin closes.
GRABBER = """
import sys, ray
from ray.util.placement_group import placement_group
ray.init(address=sys.argv[1], namespace="grabber", log_to_driver=False)
group = placement_group([{"NPU": 8, "CPU": 4}] * 2, strategy="STRICT_SPREAD", name="grabber")
ray.get(group.ready(), timeout=60)
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster({"num_cpus": 0}, *[{"num_cpus": 4, "resources": {"NPU": 8}}] * 2) as c:
        yield c


@pytest.fixture
def run(cli, write, cluster, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    return lambda text, *args: cli(
        "run", "--placement-only", "-c", write("run.yaml", MINIMAL + text), "hardware=ascend910b", *args
    )


def test_feasibility_names_the_short_resource(run):
    result = run(
        "cluster:\n  node_num: 2\n  gpu_per_node: 8\nexplorer:\n  rollout_model:\n    engine_num: 12\n", "--dry-run"
    )
    assert result.code == 2
    assert "does NOT fit the cluster:" in result.out
    assert (
        "rollout needs 12 NPU + 12 CPU in PACK (12 bundles of 1 NPU + 1 CPU); nodes have 4 and 0 and 0 CPU free: "
        "does not fit" in result.out
    )
    assert (
        "trinity: the cluster cannot place this run\n"
        "error: Ray cluster: placement: the launch plan does not fit the Ray cluster; nothing was created" in result.err
    )
    assert "nodes have 4 and 0 and 0 CPU free" in result.err  # the hint repeats the explanation


@pytest.fixture
def grab_after_the_check(cluster, monkeypatch):
    """Start the second driver after feasibility said the plan fits and before the groups are created."""
    grabbers = []
    create_groups = Launch.create_groups

    def grab_then_create(self):
        proc = subprocess.Popen(
            [sys.executable, "-c", GRABBER, cluster.address], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        grabbers.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return create_groups(self)

    monkeypatch.setattr(Launch, "create_groups", grab_then_create)
    yield grabbers
    for proc in grabbers:
        proc.communicate(timeout=60)  # closing stdin ends the driver; Ray removes its group


@pytest.fixture
def groups_at_shutdown(monkeypatch):
    """The cluster's placement groups as the run's driver saw them just before it disconnected."""
    seen = []
    shutdown = ray.shutdown

    def record_then_shutdown(*args, **kwargs):
        if ray.is_initialized():
            seen.append({g["name"]: g["state"] for g in placement_group_table().values()})
        return shutdown(*args, **kwargs)

    monkeypatch.setattr(ray, "shutdown", record_then_shutdown)
    return seen


def test_a_group_that_misses_the_timeout_is_removed_and_explained(run, grab_after_the_check, groups_at_shutdown):
    result = run("mode: train\ncluster:\n  gpu_per_node: 4\n", "--timeout", "3")
    assert result.code == 2, result.err
    assert "fits the cluster:" in result.out  # the check passed before the devices were taken
    assert (
        "trinity: the cluster cannot place this run\n"
        "error: Ray cluster: placement: placement group trainer_node0 was not placed within 3 s; it was removed"
        in result.err
    )
    assert (
        "hint: trainer_node0 needs 4 NPU + 4 CPU on one node (STRICT_PACK); the largest free is 0 NPU and 0 CPU: "
        "does not fit" in result.err
    )
    assert "Traceback" not in result.err and len(grab_after_the_check) == 1
    assert groups_at_shutdown[-1] == {"grabber": "CREATED", "trainer_node0": "REMOVED"}
