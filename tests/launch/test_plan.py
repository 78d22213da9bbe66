"""The launch plan as data: groups, bundles, Ray options and env per actor, for every mode."""

import json
import subprocess
import sys

import pytest

from tests.conftest import MINIMAL, REFERENCE
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.launch.plan import STEPS_GROUP, PlacementGroupSpec, auxiliary_slot, beside_an_engine, build_plan


def plan_for(*overrides, config=REFERENCE, exported=None):
    return build_plan(resolve(Request(config, overrides)).config, exported or {})


def test_reference_on_ascend(cli):
    plan = cli("run", "--config", REFERENCE, "hardware=ascend910b", "--dry-run", "--format", "json").json()
    groups = {g["name"]: g for g in plan["placement_groups"]}
    assert groups["trainer_node0"] == {
        "name": "trainer_node0",
        "strategy": "STRICT_PACK",
        "bundles": [{"NPU": 1, "CPU": 1}] * 2,
    }
    assert groups["rollout"] == {"name": "rollout", "strategy": "PACK", "bundles": [{"NPU": 1, "CPU": 1}] * 4}
    actors = {a["name"]: a for a in plan["actors"]}
    assert actors["rollout.engine0"]["options"] == {"num_cpus": 1, "resources": {"NPU": 1}}
    assert actors["rollout.engine0"]["placement_group"] == "rollout" and actors["rollout.engine3"]["bundle_index"] == 3
    assert actors["trainer_node0.rank1"]["env"]["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"
    assert actors["explorer"]["options"] == {"num_cpus": 1} and actors["explorer"]["placement_group"] is None
    assert all(
        a["env"]["TRINITY_DEVICE"] == "npu" and a["env"]["TRINITY_HARDWARE"] == "ascend910b" for a in plan["actors"]
    )


def test_reference_on_a100_asks_with_num_gpus():
    plan = plan_for("hardware=a100")
    engine = next(a for a in plan.actors if a.name == "rollout.engine0")
    assert engine.options == {"num_cpus": 1, "num_gpus": 1}  # resources={"GPU": n} is rejected by Ray
    assert plan.group("rollout").bundles[0] == {"GPU": 1, "CPU": 1}
    assert engine.env["NCCL_CUMEM_ENABLE"] == "0"


def test_cpu_profile_uses_cpu_slots():
    plan = plan_for("hardware=cpu")
    assert plan.group("rollout").bundles[0] == {"CPU": 1}
    assert {tuple(a.options) for a in plan.actors} == {("num_cpus",)}


def test_engine_larger_than_a_node_gets_one_bundle_per_node():
    plan = plan_for(
        "hardware=ascend910b",
        "cluster.node_num=3",
        "~cluster.gpu_per_node",
        "explorer.rollout_model.engine_num=1",
        "explorer.rollout_model.tensor_parallel_size=16",
    )
    assert plan.group("rollout").bundles == ({"NPU": 8, "CPU": 8}, {"NPU": 8, "CPU": 8})
    parts = [a for a in plan.actors if a.role == "rollout"]
    assert [(a.name, a.bundle_index, a.devices) for a in parts] == [
        ("rollout.engine0.part0", 0, 8),
        ("rollout.engine0.part1", 1, 8),
    ]


def test_trainer_gets_one_strict_pack_group_per_node():
    plan = plan_for(
        "hardware=a100", "cluster.node_num=3", "~cluster.gpu_per_node", "explorer.rollout_model.engine_num=8"
    )
    trainer_groups = [g for g in plan.placement_groups if g.name.startswith("trainer")]
    assert [(g.name, g.strategy, len(g.bundles)) for g in trainer_groups] == [
        ("trainer_node0", "STRICT_PACK", 8),
        ("trainer_node1", "STRICT_PACK", 8),
    ]
    assert plan.placement_groups[-1].name == "rollout"  # trainer groups are created first, whole nodes before packing
    ranks = [a.name for a in plan.actors if a.role == "trainer"]
    assert ranks[0] == "trainer_node0.rank0" and ranks[-1] == "trainer_node1.rank15"


def test_train_mode_has_no_rollout_or_explorer():
    plan = plan_for("hardware=a100", "mode=train")
    assert [g.name for g in plan.placement_groups] == ["trainer_node0"]
    assert {a.role for a in plan.actors} == {"trainer", "buffer"}


@pytest.mark.parametrize("profile", ["a100", "ascend910b"])
def test_under_fully_async_the_explorer_runs_its_batches_in_flight_and_an_evaluation_in_a_group_of_their_own(profile):
    explorer = {a.role: a for a in plan_for(f"hardware={profile}").actors}["explorer"]
    assert "concurrency_groups" not in explorer.options  # one call at a time
    for inflight in (1, 3):
        overrides = (
            f"hardware={profile}",
            "synchronizer.sync_style=fully_async",
            f"explorer.max_inflight_batches={inflight}",
        )
        explorer = {a.role: a for a in plan_for(*overrides).actors}["explorer"]
        assert explorer.options["concurrency_groups"] == {STEPS_GROUP: inflight + 1}


def test_explore_mode_has_no_trainer():
    plan = plan_for("hardware=ascend910b", "mode=explore")
    assert [g.name for g in plan.placement_groups] == ["rollout"] and {a.role for a in plan.actors} == {
        "rollout",
        "explorer",
        "buffer",
    }


def test_each_auxiliary_model_gets_a_pack_group_of_its_own_engines_ranked_after_the_models_before(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(
        MINIMAL
        + "explorer:\n  auxiliary_models:\n"
        + "    - {model_path: /models/judge, engine_num: 2, tensor_parallel_size: 2}\n"
        + "    - {model_path: /models/rm, engine_num: 1}\n"
    )
    plan = plan_for("hardware=ascend910b", config=path)
    assert plan.group("auxiliary0") == PlacementGroupSpec("auxiliary0", "PACK", ({"NPU": 2, "CPU": 2},) * 2)
    assert plan.group("auxiliary1") == PlacementGroupSpec("auxiliary1", "PACK", ({"NPU": 1, "CPU": 1},))
    found = [(a.name, a.role, a.rank, a.options) for a in plan.actors if a.role == "auxiliary"]
    assert found == [
        ("auxiliary0.engine0", "auxiliary", 0, {"num_cpus": 2, "resources": {"NPU": 2}}),
        ("auxiliary0.engine1", "auxiliary", 1, {"num_cpus": 2, "resources": {"NPU": 2}}),
        ("auxiliary1.engine0", "auxiliary", 2, {"num_cpus": 1, "resources": {"NPU": 1}}),
    ]
    # 8 NPUs: 1 rollout + 5 auxiliary leave the trainer 2
    assert len([a for a in plan.actors if a.role == "trainer"]) == 2
    config = resolve(Request(path, ("hardware=ascend910b",))).config
    assert [auxiliary_slot(config, r) for r in range(3)] == [(0, 0), (0, 1), (1, 0)]
    assert not any(a.role == "auxiliary" for a in plan_for("hardware=ascend910b", "mode=train", config=path).actors)


def test_colocate_shares_each_device():
    plan = plan_for("hardware=ascend910b", "mode=colocate")
    assert [g.name for g in plan.placement_groups] == ["trainer_node0"]
    assert plan.group("trainer_node0").bundles[0] == {"NPU": 1, "CPU": 2}
    engine = next(a for a in plan.actors if a.name == "rollout.engine0")
    assert engine.placement_group == "trainer_node0" and engine.options == {"num_cpus": 1, "resources": {"NPU": 0.5}}


@pytest.mark.parametrize(
    "engines,tp,devices",
    [(1, 1, 8), (2, 2, 8), (4, 2, 8), (1, 16, 8), (3, 1, 4)],  # TP 16: an engine across 2 nodes
)
def test_the_trainer_ranks_beside_an_engine_are_those_whose_bundle_an_engine_worker_takes(engines, tp, devices):
    """A colocated sync's trainer rank exports its device buffer only where an engine worker maps it."""
    model = (f"explorer.rollout_model.engine_num={engines}", f"explorer.rollout_model.tensor_parallel_size={tp}")
    nodes = max(engines * tp // devices, 1)
    cluster = (f"cluster.gpu_per_node={devices}", f"cluster.node_num={nodes}")
    config = resolve(Request(REFERENCE, ("hardware=a100", "mode=colocate", *model, *cluster))).config
    plan = build_plan(config, {})
    taken = {(a.placement_group, a.bundle_index) for a in plan.actors if a.role == "rollout"}
    ranks = [a for a in plan.actors if a.role == "trainer"]
    assert len(ranks) == nodes * devices and len(taken) == engines * tp
    assert [beside_an_engine(config, a.rank) for a in ranks] == [
        (a.placement_group, a.bundle_index) in taken for a in ranks
    ]


def test_no_trainer_rank_is_beside_an_engine_that_has_devices_of_its_own():
    both = resolve(Request(REFERENCE, ("hardware=a100", "explorer.rollout_model.engine_num=2"))).config
    assert [beside_an_engine(both, rank) for rank in range(2)] == [False, False]


def test_an_exported_variable_wins_and_is_marked():
    plan = plan_for("hardware=ascend910b", exported={"HCCL_CONNECT_TIMEOUT": "3600"})
    trainer = next(a for a in plan.actors if a.role == "trainer")
    assert trainer.env["HCCL_CONNECT_TIMEOUT"] == "3600" and trainer.env_exported == ("HCCL_CONNECT_TIMEOUT",)


def test_dry_run_text(cli):
    result = cli("run", "--config", REFERENCE, "hardware=ascend910b", "--dry-run")
    assert result.code == 0, result.err
    out = result.out
    assert "launch plan for ascend910b (npu, Ray resource NPU)" in out
    assert (
        "trainer_node0  STRICT_PACK  2 x {NPU: 1, CPU: 1}" in out
        and "rollout        PACK         4 x {NPU: 1, CPU: 1}" in out
    )
    assert "rollout.engine0      rollout   rollout[0]        num_cpus=1, resources={'NPU': 1}" in out


def test_dry_run_imports_no_ray_without_a_cluster(tmp_path):
    probe = (
        f"import sys; from trinity.cli.main import main; main(['run', '--config', {str(REFERENCE)!r}, "
        "'hardware=a100', '--dry-run']); print('ray' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize(
    "profile,bundle",
    [
        ("ascend910b", {"NPU": 1, "CPU": 1}),
        ("a100", {"GPU": 1, "CPU": 1}),
        ("h200", {"GPU": 1, "CPU": 1}),
        ("cpu", {"CPU": 1}),
    ],
)
def test_plan_json_is_the_contract(cli, profile, bundle):
    result = cli("run", "--config", REFERENCE, f"hardware={profile}", "--dry-run", "--format", "json")
    assert result.code == 0, result.err
    plan = result.json()
    # the trainer takes whole nodes first (STRICT_PACK); rollout is never confined to one node (PACK)
    assert [(g["name"], g["strategy"]) for g in plan["placement_groups"]] == [
        ("trainer_node0", "STRICT_PACK"),
        ("rollout", "PACK"),
    ]
    assert all(
        set(g) == {"name", "strategy", "bundles"} and set(map(json.dumps, g["bundles"])) == {json.dumps(bundle)}
        for g in plan["placement_groups"]
    )
    sizes = {g["name"]: len(g["bundles"]) for g in plan["placement_groups"]}
    for actor in plan["actors"]:
        assert {"name", "role", "placement_group", "bundle_index", "options", "env"} <= set(actor)
        assert actor["placement_group"] is None or 0 <= actor["bundle_index"] < sizes[actor["placement_group"]]


def actor_rows(plan: dict) -> list[tuple]:
    return [(a["name"], a["placement_group"], a["bundle_index"], a["options"], a["devices"]) for a in plan["actors"]]


def test_every_actor_of_a_colocated_plan(cli, write):
    # colocate: each rollout engine takes the other half of consecutive trainer bundles, part by part
    path = write(
        "run.yaml",
        MINIMAL + "mode: colocate\nray_namespace: myns\nexplorer:\n  rollout_model:\n    engine_num: 2\n    "
        "tensor_parallel_size: 2\n",
    )
    result = cli("run", "-c", path, "hardware=ascend910b", "--dry-run", "--format", "json")
    assert result.code == 0, result.err
    plan = result.json()
    assert (plan["namespace"], plan["visible_devices_env"], plan["device_type"]) == (
        "myns",
        "ASCEND_RT_VISIBLE_DEVICES",
        "npu",
    )
    assert plan["placement_groups"] == [
        {"name": "trainer_node0", "strategy": "STRICT_PACK", "bundles": [{"NPU": 1, "CPU": 2}] * 8}
    ]
    half = {"num_cpus": 1, "resources": {"NPU": 0.5}}
    assert actor_rows(plan) == [
        *[(f"trainer_node0.rank{r}", "trainer_node0", r, half, 0.5) for r in range(8)],
        ("rollout.engine0.part0", "trainer_node0", 0, half, 0.5),
        ("rollout.engine0.part1", "trainer_node0", 1, half, 0.5),
        ("rollout.engine1.part0", "trainer_node0", 2, half, 0.5),
        ("rollout.engine1.part1", "trainer_node0", 3, half, 0.5),
        ("explorer", None, None, {"num_cpus": 1}, 0),
        ("buffer", None, None, {"num_cpus": 0}, 0),
    ]


def test_every_actor_of_a_plan_in_both_mode(cli, write):
    result = cli("run", "-c", write("run.yaml", MINIMAL), "hardware=ascend910b", "--dry-run", "--format", "json")
    assert result.code == 0, result.err
    plan = result.json()
    one = {"num_cpus": 1, "resources": {"NPU": 1}}
    assert plan["namespace"] == "Trinity-RFT/rft"  # <project>/<name> without ray_namespace
    assert actor_rows(plan) == [
        *[(f"trainer_node0.rank{r}", "trainer_node0", r, one, 1) for r in range(7)],
        ("rollout.engine0", "rollout", 0, one, 1),
        ("explorer", None, None, {"num_cpus": 1}, 0),
        ("buffer", None, None, {"num_cpus": 0}, 0),
    ]
