"""`trinity run` on a real multi-node Ray cluster (ray.cluster_utils.Cluster): three simulated
nodes with 4 NPU and 4 GPU each. Every actor reports its node and visible devices; the launcher
checks them against the plan."""

import pytest
import ray

from tests.conftest import MINIMAL, ray_cluster

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster({"num_cpus": 4}, *[{"num_cpus": 8, "num_gpus": 4, "resources": {"NPU": 4}}] * 3) as c:
        yield c


@pytest.fixture
def run(cli, write, cluster, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)

    def _run(text: str, *args: str):
        return cli(
            "run",
            "--placement-only",
            "-c",
            write("run.yaml", MINIMAL + text),
            "--format",
            "json",
            "--timeout",
            "60",
            *args,
        )

    return _run


def by_actor(result):
    return {p["actor"]: p for p in result.json()["placements"]}


def test_rollout_larger_than_a_node_spreads_over_nodes(run):
    result = run(
        "cluster:\n  node_num: 2\nexplorer:\n  rollout_model:\n    engine_num: 3\n    tensor_parallel_size: 2\n",
        "hardware=ascend910b",
    )
    assert result.code == 0, result.err
    found = by_actor(result)
    assert all(p["problem"] == "" for p in found.values())
    engines = [found[f"rollout.engine{i}"] for i in range(3)]
    assert len({e["node_id"] for e in engines}) == 2 and all(len(e["visible_devices"].split(",")) == 2 for e in engines)
    assert found["trainer_node0.rank0"]["device"] == "npu" and found["explorer"]["visible_devices"] in (None, "")


def test_engine_larger_than_a_node_spans_whole_nodes(run):
    result = run(
        "mode: explore\ncluster:\n  node_num: 2\nexplorer:\n  rollout_model:\n    tensor_parallel_size: 8\n",
        "hardware=ascend910b",
    )
    assert result.code == 0, result.err
    found = by_actor(result)
    parts = [found["rollout.engine0.part0"], found["rollout.engine0.part1"]]
    assert parts[0]["node_id"] != parts[1]["node_id"] and [len(p["visible_devices"].split(",")) for p in parts] == [
        4,
        4,
    ]


def test_trainer_gets_whole_nodes(run):
    result = run("mode: train\ncluster:\n  node_num: 2\n", "hardware=ascend910b")
    assert result.code == 0, result.err
    found = by_actor(result)
    node0 = {found[f"trainer_node0.rank{r}"]["node_id"] for r in range(4)}
    node1 = {found[f"trainer_node1.rank{r}"]["node_id"] for r in range(4, 8)}
    assert len(node0) == len(node1) == 1 and node0 != node1
    assert sorted(found[f"trainer_node0.rank{r}"]["visible_devices"] for r in range(4)) == ["0", "1", "2", "3"]


def test_gpu_variant_asks_with_num_gpus(run):
    result = run("", "hardware=a100")
    assert result.code == 0, result.err
    plan = {a["name"]: a for a in result.json()["plan"]["actors"]}
    assert plan["rollout.engine0"]["options"] == {"num_cpus": 1, "num_gpus": 1}
    found = by_actor(result)
    assert (
        found["rollout.engine0"]["device"] == "cuda"
        and len(found["trainer_node0.rank2"]["visible_devices"].split(",")) == 1
    )
    assert all(p["problem"] == "" for p in found.values())


def test_infeasible_layout_is_reported_before_anything_is_created(run, cluster):
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    ray.init(address=cluster.address)
    blocker = placement_group([{"NPU": 2}] * 3, strategy="STRICT_SPREAD", lifetime="detached", name="blocker")
    ray.get(blocker.ready(), timeout=60)
    ray.shutdown()
    try:
        result = run("mode: train\n", "hardware=ascend910b")
        assert result.code == 2
        assert "the launch plan does not fit the Ray cluster; nothing was created" in result.err
        assert "trinity: the cluster cannot place this run\n" in result.err
        assert (
            "trainer_node0 needs 4 NPU + 4 CPU on one node (STRICT_PACK); the largest free is 2 NPU: does not fit"
            in result.err
        )
        ray.init(address=cluster.address)
        live = [g for g in placement_group_table().values() if g["state"] != "REMOVED"]
        assert [g["name"] for g in live] == ["blocker"]
    finally:
        if not ray.is_initialized():
            ray.init(address=cluster.address)
        remove_placement_group(blocker)
        ray.shutdown()


def test_dry_run_checks_a_named_cluster(cli, write, cluster, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    path = write("run.yaml", MINIMAL + "mode: train\ncluster:\n  node_num: 4\n")
    result = cli("run", "-c", path, "hardware=ascend910b", "--dry-run")
    assert (
        result.code == 2
        and "the run needs 4 node(s) with 4 NPU each; the Ray cluster's nodes offer NPU: 4, 4, 4" in result.err
        and "trinity: the cluster cannot place this run\n" in result.err
    )
    ok = cli("run", "-c", write("ok.yaml", MINIMAL), "hardware=ascend910b", "--dry-run")
    assert ok.code == 0 and "fits the cluster:" in ok.out and "rollout needs 1 NPU + 1 CPU in PACK" in ok.out


@pytest.mark.parametrize("hardware", ["ascend910b", "a100"])
def test_auxiliary_engines_are_placed_on_devices_of_their_own(run, hardware):
    """A judge of 2 engines x TP 2 beside 2 rollout engines: each engine sees its own devices, none shared."""
    text = (
        "mode: explore\ncluster:\n  node_num: 2\nexplorer:\n  rollout_model:\n    engine_num: 2\n  auxiliary_models:\n"
        "    - {model_path: /models/judge, engine_num: 2, tensor_parallel_size: 2}\n"
    )
    result = run(text, f"hardware={hardware}")
    assert result.code == 0, result.err
    found = by_actor(result)
    assert all(p["problem"] == "" for p in found.values())
    engines = ["rollout.engine0", "rollout.engine1", "auxiliary0.engine0", "auxiliary0.engine1"]
    held = {(found[e]["node_id"], d) for e in engines for d in found[e]["visible_devices"].split(",")}
    assert [len(found[e]["visible_devices"].split(",")) for e in engines] == [1, 1, 2, 2] and len(held) == 6


def test_auxiliary_engines_that_do_not_fit_end_the_run_before_ray(cli, write):
    text = MINIMAL + "mode: explore\nexplorer:\n  auxiliary_models:\n    - {model_path: /models/judge, engine_num: 8}\n"
    result = cli("run", "-c", write("run.yaml", text), "hardware=ascend910b", "cluster.ray_address=local")
    assert result.code == 2
    assert "explorer.auxiliary_models: rollout needs 9 devices, 8 of them the auxiliary models' engines," in result.err
