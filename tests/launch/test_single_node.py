"""The RFC's reference config launched unchanged on one simulated Ascend 910B node and one A100 node
(a single Ray node declaring 8 NPU and 8 GPU)."""

import os

import pytest

from tests.conftest import REFERENCE

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def node():
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 12, "num_gpus": 8, "resources": {"NPU": 8}})
    yield c
    c.shutdown()


@pytest.mark.parametrize("profile,device,visible_env", [("ascend910b", "npu", "ASCEND_RT_VISIBLE_DEVICES"), ("a100", "cuda", "CUDA_VISIBLE_DEVICES")])
def test_reference_config_launches(cli, node, monkeypatch, profile, device, visible_env):
    monkeypatch.setenv("RAY_ADDRESS", node.address)
    result = cli("run", "--placement-only", "--config", REFERENCE, f"hardware={profile}", "--format", "json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["plan"]["visible_devices_env"] == visible_env
    found = {p["actor"]: p for p in report["placements"]}
    assert set(found) == {"trainer_node0.rank0", "trainer_node0.rank1", *(f"rollout.engine{i}" for i in range(4)), "explorer", "synchronizer", "buffer"}
    assert all(p["problem"] == "" and p["device"] == device for p in found.values())
    devices = [found[name]["visible_devices"] for name in found if name.startswith(("rollout", "trainer"))]
    assert len(set(devices)) == 6  # six distinct devices: 4 rollout + 2 trainer
    assert "nothing was trained" in result.err


def test_text_run_shows_plan_and_placements(cli, node, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", node.address)
    result = cli("run", "--placement-only", "--config", REFERENCE, "hardware=ascend910b", "explorer.rollout_model.engine_num=1")
    assert result.code == 0, result.err
    assert "fits the cluster:" in result.out and "rollout.engine0" in result.out
    assert result.out.count(" ok\n") == 9  # 1 rollout engine, 5 trainer ranks (6 - 1), explorer, synchronizer, buffer
