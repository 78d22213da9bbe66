"""Feasibility, group by group, before anything is created."""

from tests.launch.test_plan import plan_for
from trinity.launch.feasibility import check
from trinity.launch.plan import LaunchPlan, PlacementGroupSpec
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
    assert (
        len(set(result.placement["rollout"])) == 2
        and result.placement["trainer_node0"][0] not in result.placement["rollout"]
    )


def test_trainer_group_larger_than_any_free_node():
    result = check(plan_for(*BIG), nodes(4, 4, 8, total=8)[:2])
    assert not result.ok
    assert (
        result.lines[0]
        == "trainer_node0 needs 8 NPU + 8 CPU on one node (STRICT_PACK); the largest free is 4 NPU: does not fit"
    )


def test_rollout_that_does_not_fit():
    result = check(plan_for(*BIG), nodes(8, 8, 4))
    assert not result.ok
    assert (
        result.lines[1]
        == "rollout needs 16 NPU + 16 CPU in PACK (16 bundles of 1 NPU + 1 CPU); nodes have 8 and 4 and 0 NPU free: "
        "does not fit"
    )


def test_loose_actors_need_a_cpu():
    plan = plan_for("hardware=ascend910b", "mode=explore", "explorer.rollout_model.engine_num=1")
    result = check(plan, [Node("n" * 12, {"NPU": 8, "CPU": 1})])
    assert (
        not result.ok
        and result.lines[-1] == "explorer needs 1 CPU outside the groups; the nodes have 0 CPU free: does not fit"
    )


def npu_nodes(*spec):
    """Nodes from (free NPU, free CPU) pairs."""
    return [Node(f"node{i}aaaaaaaa", {"NPU": npu, "CPU": cpu}) for i, (npu, cpu) in enumerate(spec)]


def group_plan(*groups):
    return LaunchPlan("ascend910b", "NPU", "ASCEND_RT_VISIBLE_DEVICES", "ns", "npu", tuple(groups), ())


def test_the_short_resource_is_named_with_what_each_node_has_free():
    # Two nodes of 8 NPU and 4 CPU: the trainer takes 4 NPU + 4 CPU, leaving 12 NPU but 4 CPU.
    plan = plan_for(
        "hardware=ascend910b", "cluster.node_num=2", "cluster.gpu_per_node=8", "explorer.rollout_model.engine_num=12"
    )
    result = check(plan, npu_nodes((8, 4), (8, 4)))
    assert not result.ok
    assert (
        result.lines[1]
        == "rollout needs 12 NPU + 12 CPU in PACK (12 bundles of 1 NPU + 1 CPU); nodes have 4 and 0 CPU free: does "
        "not fit"
    )


def test_a_strict_pack_group_names_each_short_resource():
    result = check(
        group_plan(PlacementGroupSpec("trainer_node0", "STRICT_PACK", ({"NPU": 1, "CPU": 1},) * 4)),
        npu_nodes((8, 2), (2, 8)),
    )
    assert result.lines == (
        "trainer_node0 needs 4 NPU + 4 CPU on one node (STRICT_PACK); no node has all of it free at once (8 and 2 "
        "NPU, 8 and 2 CPU free): does not fit",
    )
    short = check(
        group_plan(PlacementGroupSpec("trainer_node0", "STRICT_PACK", ({"NPU": 1, "CPU": 1},) * 4)), npu_nodes((2, 2))
    )
    assert short.lines == (
        "trainer_node0 needs 4 NPU + 4 CPU on one node (STRICT_PACK); the largest free is 2 NPU and 2 CPU: does not "
        "fit",
    )


def test_a_pack_group_whose_resources_are_on_different_nodes():
    result = check(
        group_plan(PlacementGroupSpec("rollout", "PACK", ({"NPU": 1, "CPU": 1},) * 2)), npu_nodes((8, 0), (0, 8))
    )
    assert result.lines == (
        "rollout needs 2 NPU + 2 CPU in PACK (2 bundles of 1 NPU + 1 CPU); nodes have 8 and 0 NPU, 8 and 0 CPU free, "
        "but not together on enough nodes: does not fit",
    )


def test_a_failed_pack_group_gives_back_what_it_took():
    # rollout takes 4 of the node's 6 NPU before failing; the auxiliary group after it must still see 6.
    plan = group_plan(
        PlacementGroupSpec("rollout", "PACK", ({"NPU": 1, "CPU": 1},) * 8),
        PlacementGroupSpec("auxiliary0", "PACK", ({"NPU": 2, "CPU": 2},) * 3),
    )
    result = check(plan, npu_nodes((6, 32)))
    assert not result.ok
    assert result.lines[0].endswith("nodes have 6 NPU free: does not fit")
    assert result.lines[1] == "auxiliary0 needs 6 NPU + 6 CPU in PACK; nodes have 6 NPU free: fits on 1 node"


def test_many_nodes_are_listed_by_the_four_with_most_free():
    plan = group_plan(PlacementGroupSpec("rollout", "PACK", ({"NPU": 1, "CPU": 1},) * 2))
    result = check(plan, npu_nodes((8, 8), (2, 8), (7, 8), (1, 8), (6, 8), (3, 8)))
    assert result.lines == (
        "rollout needs 2 NPU + 2 CPU in PACK; nodes have 8, 7, 6, 3 ... (6 nodes) NPU free: fits on 2 nodes",
    )
    # each bundle to the least room that holds it
    assert result.placement["rollout"] == (
        "node3aaaaaaaa",
        "node1aaaaaaaa",
    )


def test_actors_outside_the_groups_share_one_line():
    plan = plan_for("hardware=ascend910b", "explorer.rollout_model.engine_num=1")
    result = check(plan, [Node("n" * 12, {"NPU": 8, "CPU": 6})])  # 5 trainer + 1 rollout bundles leave none
    assert result.ok is False
    assert result.lines[-1] == "explorer needs 1 CPU outside the groups; the nodes have 0 CPU free: does not fit"


def test_a_node_without_the_device_key_has_none_of_it():
    # a Ray head node often declares CPUs only
    head, worker = Node("head", {"CPU": 4}), Node("worker", {"NPU": 8, "CPU": 8})
    fits = check(group_plan(PlacementGroupSpec("rollout", "PACK", ({"NPU": 1, "CPU": 1},) * 4)), [head, worker])
    assert fits.lines == ("rollout needs 4 NPU + 4 CPU in PACK; nodes have 8 and 0 NPU free: fits on 1 node",)
    too_many = check(group_plan(PlacementGroupSpec("rollout", "PACK", ({"NPU": 1, "CPU": 1},) * 9)), [head, worker])
    assert too_many.ok is False and too_many.lines[0].endswith("nodes have 8 and 0 NPU free: does not fit")
    nowhere = check(group_plan(PlacementGroupSpec("trainer_node0", "STRICT_PACK", ({"NPU": 1, "CPU": 1},) * 2)), [head])
    assert nowhere.lines == (
        "trainer_node0 needs 2 NPU + 2 CPU on one node (STRICT_PACK); the largest free is 0 NPU: does not fit",
    )


def test_a_bundle_without_devices_may_go_to_a_node_without_devices():
    head, worker = Node("head", {"CPU": 4}), Node("worker", {"NPU": 8, "CPU": 0})
    result = check(group_plan(PlacementGroupSpec("cpus", "PACK", ({"CPU": 2},) * 2)), [head, worker])
    assert result.ok and result.placement["cpus"] == ("head", "head")


def test_only_the_resource_that_is_short_is_named():
    # 4 NPU are exactly enough on the node; the CPUs are not
    exact = check(
        group_plan(PlacementGroupSpec("trainer_node0", "STRICT_PACK", ({"NPU": 1, "CPU": 1},) * 4)), npu_nodes((4, 2))
    )
    assert exact.lines == (
        "trainer_node0 needs 4 NPU + 4 CPU on one node (STRICT_PACK); the largest free is 2 CPU: does not fit",
    )
    half = check(
        group_plan(PlacementGroupSpec("trainer_node0", "STRICT_PACK", ({"NPU": 1, "CPU": 1},) * 4)),
        [Node("n", {"NPU": 3.5, "CPU": 8})],
    )
    assert half.lines == (
        "trainer_node0 needs 4 NPU + 4 CPU on one node (STRICT_PACK); the largest free is 3.5 NPU: does not fit",
    )


def test_a_pack_group_counts_whole_bundles_per_node():
    # 3 + 3 CPUs are 6, but each node holds one 2-CPU bundle: 2 of the 3 bundles
    three = check(
        group_plan(PlacementGroupSpec("rollout", "PACK", ({"NPU": 1, "CPU": 2},) * 3)), npu_nodes((8, 3), (8, 3))
    )
    assert three.lines == (
        "rollout needs 3 NPU + 6 CPU in PACK (3 bundles of 1 NPU + 2 CPU); nodes have 3 and 3 CPU free: does not fit",
    )
    halves = check(
        group_plan(PlacementGroupSpec("rollout", "PACK", ({"NPU": 1, "CPU": 2},))),
        [Node("a", {"NPU": 8, "CPU": 1.5}), Node("b", {"NPU": 8, "CPU": 1.5})],
    )
    assert halves.lines == (
        "rollout needs 1 NPU + 2 CPU in PACK (1 bundles of 1 NPU + 2 CPU); nodes have 1.5 and 1.5 CPU free: does not "
        "fit",
    )
