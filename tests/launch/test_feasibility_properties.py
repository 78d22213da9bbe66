"""Properties of the feasibility check, over random nodes and plans: nothing placed is lost or
invented, no node is given more than it has free, a STRICT_PACK group sits on one node, a group
that does not fit takes nothing, and an engine is never split into two bundles on one node.
A plan derived for a cluster fits that cluster whenever its engines tile the nodes."""

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.errors import ConfigError
from trinity.launch.feasibility import check
from trinity.launch.plan import LaunchPlan, PlacementGroupSpec, build_plan
from trinity.launch.reconcile import Node

KEYS = ("NPU", "CPU")
amounts = st.integers(0, 16).map(float)


@st.composite
def clusters(draw):
    return [
        Node(f"node{i:02d}", {"NPU": 16, "CPU": 32}, {"NPU": draw(amounts), "CPU": draw(amounts)})
        for i in range(draw(st.integers(1, 5)))
    ]


@st.composite
def groups(draw):
    bundle = {"NPU": draw(st.integers(1, 8)), "CPU": draw(st.integers(0, 8))}
    same = draw(st.booleans())  # plans use identical bundles; the check must not rely on it
    bundles = [
        bundle if same else {"NPU": draw(st.integers(1, 8)), "CPU": draw(st.integers(0, 8))}
        for _ in range(draw(st.integers(1, 6)))
    ]
    return PlacementGroupSpec(
        f"g{draw(st.integers(0, 10**6))}", draw(st.sampled_from(["PACK", "STRICT_PACK"])), tuple(bundles)
    )


@st.composite
def plans(draw):
    specs = draw(st.lists(groups(), min_size=1, max_size=4, unique_by=lambda g: g.name))
    return LaunchPlan("ascend910b", "NPU", "ASCEND_RT_VISIBLE_DEVICES", "ns", "npu", tuple(specs), ())


def placed_per_node(plan, result) -> dict[str, dict[str, float]]:
    used: dict[str, dict[str, float]] = {}
    for name, where in result.placement.items():
        for bundle, node in zip(plan.group(name).bundles, where):
            for key, value in bundle.items():
                used.setdefault(node, {}).setdefault(key, 0)
                used[node][key] += value
    return used


@given(nodes=clusters(), plan=plans())
def test_placement_respects_every_node_and_every_group(nodes, plan):
    result = check(plan, nodes)
    free = {n.node_id: n.free for n in nodes}
    # no node over capacity, for every resource
    for node, used in placed_per_node(plan, result).items():
        assert all(amount <= free[node].get(key, 0) + 1e-9 for key, amount in used.items())
    for group in plan.placement_groups:
        where = result.placement.get(group.name)
        if where is None:
            assert not result.ok  # a group left out is reported
            continue
        assert len(where) == len(group.bundles)  # every bundle placed once: devices conserved
        if group.strategy == "STRICT_PACK":
            assert len(set(where)) == 1
    assert result.ok == (len(result.placement) == len(plan.placement_groups))
    assert len(result.lines) == len(plan.placement_groups)


@given(nodes=clusters(), plan=plans())
def test_a_group_that_does_not_fit_takes_nothing(nodes, plan):
    # Checking the plan with its failing groups removed must place the rest exactly the same way.
    result = check(plan, nodes)
    fitting = tuple(g for g in plan.placement_groups if g.name in result.placement)
    again = check(
        LaunchPlan(
            *[
                getattr(plan, f)
                for f in ("hardware", "resource_key", "visible_devices_env", "namespace", "device_type")
            ],
            fitting,
            (),
        ),
        nodes,
    )
    assert again.ok and again.placement == result.placement


# --- plans derived from configs, on the cluster they were derived for ----------------------


@st.composite
def shapes(draw):
    per_node = draw(st.sampled_from([2, 4, 8]))
    return {
        "mode": draw(st.sampled_from(["both", "explore", "train", "colocate"])),
        "node_num": draw(st.integers(1, 4)),
        "per_node": per_node,
        "engine_num": draw(st.integers(1, 8)),
        "tp": draw(st.sampled_from([1, 2, 4, 8, 16])),
    }


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=shapes())
def test_a_derived_plan_fits_its_cluster_and_never_splits_an_engine_on_a_node(minimal_file, s):
    overrides = (
        "hardware=ascend910b",
        f"mode={s['mode']}",
        f"cluster.node_num={s['node_num']}",
        f"cluster.gpu_per_node={s['per_node']}",
        f"explorer.rollout_model.engine_num={s['engine_num']}",
        f"explorer.rollout_model.tensor_parallel_size={s['tp']}",
    )
    try:
        plan = build_plan(resolve(Request(minimal_file, overrides)).config)
    except ConfigError:
        assume(False)  # the split itself is impossible (tests/config/test_cluster_properties.py)
    cpus = 2 * s["per_node"] + 1  # colocated bundles hold two processes; the explorer runs loose
    nodes = [Node(f"node{i}", {"NPU": s["per_node"], "CPU": cpus}) for i in range(s["node_num"])]
    result = check(plan, nodes)
    assert result.ok, result.lines  # engines of 1, 2, 4, 8 or 16 devices tile nodes of 2, 4 or 8
    engines: dict[str, list[str]] = {}
    for actor in plan.actors:
        if actor.role == "rollout" and actor.placement_group and s["mode"] != "colocate":
            node = result.placement[actor.placement_group][actor.bundle_index]
            engines.setdefault(actor.name.split(".part")[0], []).append(node)
    for engine, where in engines.items():
        assert len(set(where)) == len(where), f"{engine} has two bundles on one node"
        assert len(where) == max(1, s["tp"] // s["per_node"])  # one bundle per node it spans
