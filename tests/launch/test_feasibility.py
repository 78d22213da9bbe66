"""Feasibility, group by group, before anything is created."""

from tests.launch.test_plan import plan_for
from trinity.launch.feasibility import check
from trinity.launch.reconcile import Node

BIG = ("hardware=ascend910b", "cluster.node_num=3", "~cluster.gpu_per_node", "explorer.rollout_model.engine_num=16")


def nodes(*free, total=8):
    return [Node(f"node{i}aaaaaaaa", {"NPU": total, "CPU": 32}, {"NPU": f, "CPU": 32}) for i, f in enumerate(free)]


def test_rollout_spreads_over_nodes():
    result = check(plan_for(*BIG), nodes(8, 8, 8))
    assert result.ok
    assert result.lines == (
        "trainer_node0 needs 8 NPU + 8 CPU in STRICT_PACK; nodes have 8 and 8 and 8 NPU free: fits on 1 node",
        "rollout needs 16 NPU + 16 CPU in PACK; nodes have 8 and 8 and 0 NPU free: fits on 2 nodes",
    )
    assert len(set(result.placement["rollout"])) == 2 and result.placement["trainer_node0"][0] not in result.placement["rollout"]


def test_trainer_group_larger_than_any_free_node():
    result = check(plan_for(*BIG), nodes(4, 4, 8, total=8)[:2])
    assert not result.ok
    assert result.lines[0] == "trainer_node0 needs 8 NPU + 8 CPU on one node (STRICT_PACK); the largest free is 4 NPU: does not fit"


def test_rollout_that_does_not_fit():
    result = check(plan_for(*BIG), nodes(8, 8, 4))
    assert not result.ok
    assert result.lines[1] == "rollout needs 16 NPU + 16 CPU in PACK (16 bundles of 1 NPU + 1 CPU); nodes have 8 and 4 and 0 NPU free: does not fit"


def test_loose_actors_need_a_cpu():
    plan = plan_for("hardware=ascend910b", "mode=explore", "explorer.rollout_model.engine_num=1")
    result = check(plan, [Node("n" * 12, {"NPU": 8, "CPU": 1})])
    assert not result.ok and result.lines[-1] == "explorer needs 1 CPU outside the groups; the nodes have 0 CPU free: does not fit"
