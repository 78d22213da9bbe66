"""Rules of trinity/config/derive/cluster.py, each through `trinity config render/validate`:
devices per node, the mode on shared devices, and the role counts.
"""

import re

import pytest

from tests.conftest import MINIMAL

from .texts import STAGED


def test_gpu_per_node_is_what_a_node_offers_where_fewer_and_one_set_above_it_is_lowered_and_said(render):
    """cluster.node_devices (the live cluster's nodes, or this machine with hardware=auto) is a fact: unset,
    gpu_per_node takes the fewer of it and the profile's devices_per_node; set above it, it is lowered with a warning
    naming both places (an error under --strict)."""
    result, cfg = render("cluster:\n  node_devices: 4\n", "hardware=a100")
    assert cfg["cluster"]["gpu_per_node"] == 4 and result.err == ""
    result, cfg = render("cluster:\n  node_devices: 16\n", "hardware=a100")
    assert cfg["cluster"]["gpu_per_node"] == 8  # the profile's node
    result, cfg = render("cluster:\n  gpu_per_node: 6\n  node_devices: 4\n", "hardware=a100")
    assert cfg["cluster"]["gpu_per_node"] == 4
    assert (
        "warning: run.yaml:4:3: cluster.gpu_per_node: 6 devices per node, but a node offers 4 (run.yaml:5:3); using 4"
        in result.err
    )
    assert "hint: set cluster.gpu_per_node=4, or run where nodes have 6 devices" in result.err
    result, _ = render("cluster:\n  gpu_per_node: 6\n  node_devices: 4\n", "hardware=a100", "--strict")
    assert result.code == 2 and "cluster.gpu_per_node: 6 devices per node, but a node offers 4" in result.err


def test_gpu_per_node_defaults_to_the_profile(render):
    cluster = render("", "hardware=ascend910c")[1]["cluster"]
    assert cluster["gpu_per_node"] == 16 and cluster["total_gpu_num"] == 16
    assert cluster["rollout_gpu_num"] == 1 and cluster["trainer_gpu_num"] == 15


def test_gpu_per_node_may_not_exceed_the_node(render):
    result, _ = render("cluster:\n  gpu_per_node: 16\n", "hardware=a100")
    assert result.code == 2
    assert re.search(
        r"error: run.yaml:4:3: cluster.gpu_per_node: 16 devices per node, but one a100 node has 8 "
        r"\(\S*profiles/a100.yaml:\d+:\d+\)",
        result.err,
    )
    assert "allowed: 1..8" in result.err


def test_trainer_gets_whole_nodes(render):
    cluster = render(
        "cluster:\n  node_num: 3\nexplorer:\n  rollout_model:\n    engine_num: 2\n    tensor_parallel_size: 4\n",
        "hardware=a100",
    )[1]["cluster"]
    assert (cluster["total_gpu_num"], cluster["rollout_gpu_num"], cluster["trainer_gpu_num"]) == (24, 8, 16)
    assert (cluster["trainer_node_num"], cluster["trainer_gpu_num_per_node"]) == (2, 8)


def test_engine_larger_than_a_node_spans_whole_nodes(render):
    cfg = render(
        "cluster:\n  node_num: 3\nexplorer:\n  rollout_model:\n    tensor_parallel_size: 16\n", "hardware=ascend910b"
    )[1]
    assert cfg["cluster"]["rollout_gpu_num"] == 16 and cfg["cluster"]["trainer_gpu_num"] == 8


def test_engine_that_does_not_fill_whole_nodes_is_an_error(render):
    result, _ = render(
        "cluster:\n  node_num: 2\nexplorer:\n  rollout_model:\n    tensor_parallel_size: 12\n", "hardware=ascend910b"
    )
    assert result.code == 2
    assert (
        "explorer.rollout_model.tensor_parallel_size: one engine needs 12 devices (TP x PP x DP); an engine larger "
        "than a node must span whole nodes of 8" in result.err
    )


def test_trainer_left_with_nothing_is_an_error_where_a_person_set_the_mode(render):
    yaml = "mode: both\ncluster:\n  gpu_per_node: 4\nexplorer:\n  rollout_model:\n    engine_num: 4\n"
    result, _ = render(yaml, "hardware=a100")
    assert result.code == 2
    assert (
        "run.yaml:8:5: explorer.rollout_model.engine_num: no devices left for the trainer: 4 devices (1 node(s) x 4) "
        "minus 4 for rollout" in result.err
    )
    assert "or set mode=colocate (trainer and engines take turns on the devices)" in result.err


def test_a_mode_nobody_set_takes_turns_on_a_single_device(render):
    """One device can only be shared: the schema's `both` becomes `colocate`, and --explain says why. On more devices
    `both` stays, and leaving the trainer nothing is refused with the settings that work (a person chooses the mode)."""
    result, cfg = render(
        "cluster:\n  gpu_per_node: 1\nexplorer:\n  rollout_model:\n    engine_num: 1\n", "hardware=a100"
    )
    assert result.code == 0, result.err
    assert cfg["mode"] == "colocate" and (cfg["cluster"]["trainer_gpu_num"], cfg["cluster"]["rollout_gpu_num"]) == (
        1,
        1,
    )
    assert (cfg["synchronizer"]["sync_method"], cfg["synchronizer"]["sync_channel"]) == ("memory", "device_ipc")
    assert (
        "note: schema default: mode: the run has one device, which an engine and a trainer rank can only share: mode "
        "'colocate', the trainer and the engines taking turns on it" in result.err
    )
    result, _ = render("cluster:\n  gpu_per_node: 4\nexplorer:\n  rollout_model:\n    engine_num: 4\n", "hardware=a100")
    assert result.code == 2 and "minus 4 for rollout" in result.err and "or set mode=colocate" in result.err
    result, cfg = render(
        "cluster:\n  gpu_per_node: 2\nexplorer:\n  rollout_model:\n    engine_num: 1\n", "hardware=a100"
    )
    assert cfg["mode"] == "both" and cfg["cluster"]["trainer_gpu_num"] == 1  # a device each: side by side
    result, _ = render("mode: both\ncluster:\n  gpu_per_node: 1\n", "hardware=a100")
    assert result.code == 2 and "or set mode=colocate" in result.err  # written: never changed


def test_trainer_share_that_neither_fits_a_node_nor_fills_nodes(render):
    result, _ = render("cluster:\n  node_num: 2\nexplorer:\n  rollout_model:\n    engine_num: 4\n", "hardware=a100")
    assert result.code == 2
    assert (
        "the trainer would get 12 devices (16 - 4 for rollout): that neither fits one node of 8 nor fills whole nodes"
        in result.err
    )


def test_train_mode_gives_every_device_to_the_trainer(render):
    cluster = render("mode: train\ncluster:\n  node_num: 2\n", "hardware=a100")[1]["cluster"]
    assert (cluster["rollout_gpu_num"], cluster["trainer_gpu_num"], cluster["trainer_node_num"]) == (0, 16, 2)


@pytest.mark.parametrize(
    "profile,extra,trainer",
    [
        ("cpu", ("cluster.gpu_per_node=2",), 1),  # the profile's fact: the trainer's share of the RL stage
        ("a100", (), 8),  # Trinity-RFT's: every device
        ("cpu", ("cluster.gpu_per_node=2", "cluster.train_stage_devices=all"), 2),
        ("a100", ("cluster.train_stage_devices=trainer", "explorer.rollout_model.engine_num=3"), 5),
        ("cpu", ("cluster.gpu_per_node=2", "+stages.1.mode=train"), 2),  # no stage explores: nothing to share with
        # a single device: the RL stage, whose mode nobody wrote, takes turns on it (colocate), which gives its trainer
        # that device
        ("cpu", ("cluster.gpu_per_node=1",), 1),
    ],
)
def test_a_train_only_stage_trains_on_the_devices_its_run_gives_the_trainer(cli, write, profile, extra, trainer):
    path = write("run.yaml", MINIMAL + STAGED)
    result = cli("config", "render", "-c", path, f"hardware={profile}", "--stage", "sft", "--format", "json", *extra)
    assert result.code == 0, result.err
    cluster = result.json()["cluster"]
    assert (cluster["trainer_gpu_num"], cluster["rollout_gpu_num"]) == (trainer, 0)


def test_a_train_run_of_one_stage_keeps_every_device_whatever_the_setting(render):
    cluster = render("mode: train\n", "hardware=a100", "cluster.train_stage_devices=trainer")[1]["cluster"]
    assert cluster["trainer_gpu_num"] == 8


def test_the_train_stage_split_is_explained_with_the_profile_fact_and_the_runs_stages(cli, write):
    path = write("run.yaml", MINIMAL + STAGED)
    explain = ("--explain", "cluster.trainer_gpu_num", "cluster.gpu_per_node=2")
    result = cli("config", "render", "-c", path, "hardware=cpu", "--stage", "sft", *explain)
    assert result.code == 0, result.err
    last = result.out.strip().splitlines()[-1]
    assert "rule cluster_counts" in last and last.split()[3] == "1", result.out
    assert "cpu.train_stage_devices='trainer' (" in last and "the run's stages: train, both" in last
    # the root config (no stage named) is explained as before: mode both, no stage split
    root = cli("config", "render", "-c", path, "hardware=cpu", *explain)
    assert root.code == 0 and "train_stage_devices" not in root.out


def test_explore_mode_needs_rollout_to_fit(render):
    cluster = render("mode: explore\nexplorer:\n  rollout_model:\n    engine_num: 8\n", "hardware=a100")[1]["cluster"]
    assert (cluster["rollout_gpu_num"], cluster["trainer_gpu_num"]) == (8, 0)
    result, _ = render("mode: explore\nexplorer:\n  rollout_model:\n    engine_num: 9\n", "hardware=a100")
    assert (
        result.code == 2
        and "error: run.yaml:6:5: explorer.rollout_model.engine_num: rollout needs 9 devices but the cluster has 8"
        in result.err
    )


def test_derived_counts_may_not_be_contradicted(render):
    result, _ = render("cluster:\n  trainer_gpu_num: 3\n", "hardware=a100")
    assert (
        result.code == 2
        and "run.yaml:4:3: cluster.trainer_gpu_num: is derived (7) and must not be set to 3" in result.err
    )


def test_npu_only_cluster_math_never_divides_by_zero(render):
    for profile in ("ascend910b", "ascend910c"):
        assert render("mode: train\n", f"hardware={profile}")[0].code == 0
