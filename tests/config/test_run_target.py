"""What a run asks of Ray, read from the composed config: address, namespace, resource key, node shape."""

import pytest

from tests.conftest import MINIMAL
from trinity.config.compose import Request
from trinity.config.run_target import on_cluster, run_target


def test_the_address_comes_from_the_environment_before_the_config(tmp_path, monkeypatch):
    path = tmp_path / "run.yaml"
    path.write_text(MINIMAL + "cluster:\n  ray_address: 10.0.0.1:6379\n")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    target = run_target(Request(path, ("hardware=ascend910b", "project=p", "name=n")))
    assert (target.address, target.namespace, target.resource_key, target.profile) == (
        "10.0.0.1:6379",
        "p/n",
        "NPU",
        "ascend910b",
    )
    assert target.address_source == f"{path}:4:3"  # where an unreachable address is reported
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")
    from_env = run_target(Request(path, ("hardware=a100", "ray_namespace=mine")))
    assert (from_env.address, from_env.address_source) == ("10.0.0.2:6379", "$RAY_ADDRESS")
    assert run_target(Request(path, ("hardware=a100", "ray_namespace=mine"))).namespace == "mine"


def test_auto_asks_for_a_local_ray(tmp_path, monkeypatch):
    path = tmp_path / "run.yaml"
    path.write_text(MINIMAL)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert run_target(Request(path, ("hardware=cpu",))).address is None
    monkeypatch.setenv("RAY_ADDRESS", "auto")  # as Ray reads it: no address named, so the config's stands
    assert run_target(Request(path, ("hardware=cpu",))).address is None
    named = run_target(Request(path, ("hardware=cpu", "cluster.ray_address=10.0.0.1:6379")))
    assert named.address == "10.0.0.1:6379" and named.address_source.startswith("override")


def test_an_address_set_on_the_command_line_is_reported_there(tmp_path, monkeypatch):
    path = tmp_path / "run.yaml"
    path.write_text(MINIMAL)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    target = run_target(Request(path, ("hardware=cpu", "cluster.ray_address=10.0.0.1:6379")))
    assert (target.address, target.address_source) == ("10.0.0.1:6379", "override 'cluster.ray_address=10.0.0.1:6379'")


def test_the_cluster_decides_gpu_per_node_only_where_nobody_wrote_it(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(MINIMAL)
    unset = Request(path, ("hardware=a100", "cluster.node_num=2"))
    layered = on_cluster(unset, run_target(unset), [8, 4, 4])
    assert (layered.cluster.gpu_per_node, layered.cluster.source) == (4, "Ray cluster (4 GPU per node)")
    written = Request(path, ("hardware=a100", "cluster.gpu_per_node=2"))
    told = on_cluster(written, run_target(written), [8]).cluster  # only what the nodes offer
    assert (told.gpu_per_node, told.node_devices, told.source) == (None, 8, "Ray cluster (8 GPU per node)")


@pytest.mark.parametrize("value,named", [(None, None), ("", None), ("auto", None), ("10.0.0.1:6379", "10.0.0.1:6379")])
def test_ray_address_names_an_address_unless_unset_empty_or_auto(monkeypatch, value, named):
    # one rule for both readers: where Ray runs (run_target) and whether hardware=auto's devices are a node's (compose)
    from trinity.config.compose import env_ray_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if value is not None:
        monkeypatch.setenv("RAY_ADDRESS", value)
    assert env_ray_address() == named
