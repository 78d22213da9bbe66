"""The Ray cluster checked against the resolved config before any actor starts."""

import pytest

from tests.conftest import MINIMAL, REFERENCE
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.errors import ConfigError, PlacementError
from trinity.launch.reconcile import Node, live_nodes, resolve_on_cluster

EIGHT_ENGINES = "explorer:\n  rollout_model:\n    engine_num: 8\n"


def nodes(*specs):
    return [Node(f"node{i:04d}deadbeef", dict(spec)) for i, spec in enumerate(specs)]


@pytest.fixture
def run_file(tmp_path):
    def _file(text=""):
        path = tmp_path / "run.yaml"
        path.write_text(MINIMAL + text)
        return path

    return _file


def test_npu_profile_on_a_gpu_cluster_is_one_clear_error():
    with pytest.raises(ConfigError) as err:
        resolve_on_cluster(
            Request(REFERENCE, ("hardware=ascend910b",)), nodes({"CPU": 64, "GPU": 8}, {"CPU": 64, "GPU": 8})
        )
    issue = err.value.issues[0]
    assert "profile ascend910b needs Ray resource 'NPU', and no node of the cluster offers it" in issue.message
    assert "GPU=8" in issue.message and "choose a profile with device_type cuda" in issue.hint
    assert issue.source == "hardware=ascend910b on the command line"


def test_profile_on_a_cluster_without_accelerators():
    with pytest.raises(ConfigError) as err:
        resolve_on_cluster(Request(REFERENCE, ("hardware=a100",)), nodes({"CPU": 16}))
    assert "start each node's Ray with GPU resources, or choose hardware=cpu" in err.value.issues[0].hint


def test_gpu_per_node_left_unset_comes_from_an_npu_only_cluster(run_file):
    resolved = resolve_on_cluster(
        Request(run_file(), ("hardware=ascend910b",)), nodes({"CPU": 8}, {"CPU": 96, "NPU": 4})
    )
    cluster = resolved.config.cluster
    assert (cluster.gpu_per_node, cluster.total_gpu_num, cluster.trainer_gpu_num) == (4, 4, 3)
    assert resolved.provenance.where(("cluster", "gpu_per_node")) == "Ray cluster (4 NPU per node)"


def test_gpu_per_node_left_unset_is_what_node_num_nodes_all_offer(run_file):
    # nodes of 8, 8 and 4: two nodes may use 8 each; three must settle for 4
    three = resolve_on_cluster(
        Request(run_file("mode: train\ncluster:\n  node_num: 3\n"), ("hardware=ascend910b",)),
        nodes({"NPU": 8}, {"NPU": 4}, {"NPU": 8}),
    )
    two = resolve_on_cluster(
        Request(run_file("mode: train\ncluster:\n  node_num: 2\n"), ("hardware=ascend910b",)),
        nodes({"NPU": 8}, {"NPU": 4}, {"NPU": 8}),
    )
    assert (three.config.cluster.gpu_per_node, three.config.cluster.total_gpu_num) == (4, 12)
    assert three.provenance.where(("cluster", "gpu_per_node")) == "Ray cluster (4 NPU per node)"
    assert (two.config.cluster.gpu_per_node, two.config.cluster.total_gpu_num) == (8, 16)


def test_user_gpu_per_node_larger_than_the_nodes_is_lowered_to_them_and_said(run_file):
    """What a node offers is a fact of the cluster: gpu_per_node above it is lowered to it, with a warning naming both
    places; the reference's four engines then leave its trainer nothing, refused with the settings that work."""
    with pytest.raises(ConfigError) as err:
        resolve_on_cluster(Request(REFERENCE, ("hardware=ascend910b",)), nodes({"NPU": 4}, {"NPU": 4}))
    lowered, refused = (next(i for i in err.value.issues if i.severity == s) for s in ("warning", "error"))
    assert lowered.message == "6 devices per node, but a node offers 4 (Ray cluster (4 NPU per node)); using 4"
    assert lowered.source.endswith("gsm8k.yaml:18:3") and lowered.key == "cluster.gpu_per_node"
    assert refused.message == "no devices left for the trainer: 4 devices (1 node(s) x 4) minus 4 for rollout"
    assert refused.hint.endswith("or set mode=colocate (trainer and engines take turns on the devices)")
    fits = resolve_on_cluster(Request(run_file("cluster:\n  gpu_per_node: 8\n"), ("hardware=a100",)), nodes({"GPU": 2}))
    assert fits.config.cluster.gpu_per_node == 2 and fits.config.cluster.trainer_gpu_num == 1
    assert [i.key for i in fits.issues if i.severity == "warning"] == ["cluster.gpu_per_node"]


def test_too_few_nodes(run_file):
    with pytest.raises(ConfigError) as err:
        resolve_on_cluster(
            Request(run_file(EIGHT_ENGINES + "cluster:\n  node_num: 3\n"), ("hardware=a100",)),
            nodes({"GPU": 8}, {"GPU": 8}),
        )
    assert (
        "the run needs 3 node(s) with 8 GPU each; the Ray cluster's nodes offer GPU: 8, 8"
        in err.value.issues[0].message
    )
    assert isinstance(err.value, PlacementError)
    assert err.value.report().startswith("trinity: the cluster cannot place this run\nerror: ")


def test_cluster_with_more_devices_than_the_profile_says(run_file):
    with pytest.raises(ConfigError) as err:
        resolve_on_cluster(Request(run_file(), ("hardware=a100",)), nodes({"GPU": 16}))
    issue = next(i for i in err.value.issues if i.severity == "error")
    assert (
        issue.source == "Ray cluster (16 GPU per node)"
        and "16 devices per node, but one a100 node has 8" in issue.message
    )


@pytest.mark.ray
def test_real_multi_node_cluster(run_file):
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, resources={"NPU": 8})
        ray.init(address=cluster.address, log_to_driver=False)
        found = live_nodes()
        resolved = resolve_on_cluster(
            Request(run_file(EIGHT_ENGINES + "cluster:\n  node_num: 2\n"), ("hardware=ascend910b",)), found
        )
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert sorted(n.resources.get("NPU", 0) for n in found) == [0, 8, 8]
    c = resolved.config.cluster
    assert (c.gpu_per_node, c.total_gpu_num, c.rollout_gpu_num, c.trainer_gpu_num, c.trainer_node_num) == (
        8,
        16,
        8,
        8,
        1,
    )
    assert resolved.provenance.where(("cluster", "gpu_per_node")) == "Ray cluster (8 NPU per node)"


def test_what_a_cluster_without_the_key_is_told_word_for_word():
    gpu = [
        Node("node0000deadbeef", {"CPU": 64, "GPU": 8, "memory": 1e9, "node:10.0.0.1": 1}),
        Node("node0001deadbeef", {"CPU": 64, "GPU": 8}),
    ]
    with pytest.raises(ConfigError) as err:
        resolve_on_cluster(Request(REFERENCE, ("hardware=ascend910b",)), gpu)
    issue = err.value.issues[0]
    assert (
        issue.message
        == "profile ascend910b needs Ray resource 'NPU', and no node of the cluster offers it (node0000: CPU=64, "
        "GPU=8; node0001: CPU=64, GPU=8)"
    )
    assert (
        issue.hint
        == "this cluster has GPU: choose a profile with device_type cuda (hardware=auto on one of its nodes picks one)"
    )
    assert issue.key == "hardware"
    assert isinstance(err.value, PlacementError)
    assert err.value.report().startswith("trinity: the cluster cannot place this run\n")
    with pytest.raises(ConfigError) as empty:
        resolve_on_cluster(Request(REFERENCE, ("hardware=ascend910b",)), [])
    assert (
        empty.value.issues[0].message
        == "profile ascend910b needs Ray resource 'NPU', and no node of the cluster offers it (no alive nodes)"
    )


def test_too_few_nodes_word_for_word(run_file):
    with pytest.raises(ConfigError) as err:
        resolve_on_cluster(
            Request(run_file("mode: train\ncluster:\n  node_num: 5\n"), ("hardware=ascend910b",)),
            nodes({"NPU": 8}, {"NPU": 4}, {"NPU": 8}),
        )
    issue = err.value.issues[0]
    # the smallest node sets gpu_per_node
    assert issue.message == "the run needs 5 node(s) with 4 NPU each; the Ray cluster's nodes offer NPU: 8, 8, 4"
    assert issue.allowed == "gpu_per_node <= 8 on 5 node(s)"
    assert issue.hint == "set cluster.node_num=3 (the nodes with 4 NPU), or add nodes to the cluster"


def test_one_node_takes_the_largest_and_a_single_device_counts(run_file):
    largest = resolve_on_cluster(
        Request(run_file("mode: train\n"), ("hardware=ascend910b",)), nodes({"NPU": 4}, {"NPU": 8})
    )
    assert largest.config.cluster.gpu_per_node == 8
    single = resolve_on_cluster(
        Request(run_file("mode: train\n"), ("hardware=ascend910b",)), nodes({"NPU": 1}, {"CPU": 8})
    )
    assert single.config.cluster.gpu_per_node == 1


def test_a_gpu_per_node_you_wrote_is_not_layered_over_by_the_cluster(run_file):
    resolved = resolve_on_cluster(
        Request(run_file("mode: train\ncluster:\n  gpu_per_node: 4\n"), ("hardware=ascend910b",)), nodes({"NPU": 8})
    )
    assert resolved.config.cluster.gpu_per_node == 4
    assert [c.layer for c in resolved.provenance.chain(("cluster", "gpu_per_node"))] == ["schema", "file"]


def test_strict_applies_on_the_cluster_path(run_file):
    request = Request(run_file("synchronizer:\n  sync_method: hccl\n"), ("hardware=a100",))
    assert [i.severity for i in resolve_on_cluster(request, nodes({"GPU": 8})).issues] == ["warning"]
    with pytest.raises(ConfigError) as err:
        resolve_on_cluster(request, nodes({"GPU": 8}), strict=True)
    assert err.value.issues[0].severity == "error" and err.value.issues[0].hint.endswith("(an error under --strict)")


def test_the_config_resolved_before_ray_is_launched_when_the_cluster_changes_nothing(run_file):
    from trinity.config.resolve import resolve

    written = Request(run_file(), ("hardware=ascend910b", "cluster.gpu_per_node=4"))
    before = resolve(written)
    assert resolve_on_cluster(written, nodes({"NPU": 8}), standalone=before) is before
    unset = Request(run_file(), ("hardware=ascend910b",))
    before = resolve(unset)
    after = resolve_on_cluster(unset, nodes({"NPU": 4}), standalone=before)
    assert after is not before and (before.config.cluster.gpu_per_node, after.config.cluster.gpu_per_node) == (8, 4)
    assert resolve_on_cluster(unset, nodes({"NPU": 8}), standalone=before) is before  # it restates the profile's 8


def test_a_config_lowered_to_this_machines_devices_is_resolved_again_for_a_cluster_whose_nodes_have_more(run_file):
    """hardware=auto on a driver with one GPU lowers a gpu_per_node of 8 to 1 (and colocates); a cluster of 8-GPU
    nodes must not launch that: the config is resolved again with what the cluster's nodes offer."""
    from tests.fakes import fake_machine

    request = Request(
        run_file("cluster:\n  gpu_per_node: 8\n"),
        ("hardware=auto",),
        probes=fake_machine(gpu="NVIDIA A100-SXM4-80GB", gpus=1),
    )
    standalone = resolve(request)
    assert (standalone.config.cluster.gpu_per_node, standalone.config.mode) == (1, "colocate")
    on_cluster = resolve_on_cluster(request, nodes({"GPU": 8}), standalone=standalone)
    assert on_cluster is not standalone
    assert (on_cluster.config.cluster.gpu_per_node, on_cluster.config.mode) == (8, "both")
