"""The reference config's vLLM engines and verl trainer ranks placed on a simulated node (a Ray node
declaring 8 NPU and 8 GPU): each actor runs the runtime class of its role in its bundle, sees its
devices through the hardware's variable, and has the role's env and verl's platform; nothing heavy starts."""

import os

import pytest

from tests.conftest import REFERENCE

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def node():
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 12, "num_gpus": 8, "resources": {"NPU": 8}})
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def inside(actor) -> dict:
    """The actor's class, environment and assigned accelerators, read in the actor itself."""

    def look(self):
        import os

        return {
            "class": type(self).__name__,
            "env": dict(os.environ),
            "accelerators": ray.get_runtime_context().get_accelerator_ids(),
        }

    return ray.get(actor.__ray_call__.remote(look), timeout=60)


@pytest.mark.parametrize(
    "profile,visible,rollout_env,platform",
    [
        (
            "ascend910b",
            "ASCEND_RT_VISIBLE_DEVICES",
            {"VLLM_ASCEND_ENABLE_NZ": "0", "HCCL_EXEC_TIMEOUT": "1800"},
            "huawei",
        ),
        ("a100", "CUDA_VISIBLE_DEVICES", {"NCCL_CUMEM_ENABLE": "0"}, "nvidia"),
    ],
)
def test_vllm_engines_and_verl_ranks_land_with_their_devices_and_env(
    node, tmp_path, profile, visible, rollout_env, platform
):
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.launch.launcher import Launch
    from trinity.launch.plan import build_plan
    from trinity.runtime.driver.factory import role_factory

    config = resolve(Request(REFERENCE, (f"hardware={profile}",))).config
    plan = build_plan(config)
    with Launch(plan, 60) as launch:
        launch.create_groups()
        actors = launch.start_actors(role_factory(config, tmp_path))
        assert all(p.problem == "" for p in launch.placements())
        engines = [inside(actors[f"rollout.engine{i}"]) for i in range(4)]
        ranks = [inside(actors[f"trainer_node0.rank{r}"]) for r in range(2)]
    assert {e["class"] for e in engines} == {"VllmEngine"} and {r["class"] for r in ranks} == {"TrainerRank"}
    devices = [e["env"][visible] for e in engines + ranks]
    assert len(set(devices)) == 6 and all("," not in d for d in devices)  # one device each, none shared
    for engine in engines:
        assert (
            rollout_env.items() <= engine["env"].items()
            and engine["env"]["TRINITY_DEVICE"] == config.hardware.device_type
        )
        assert "VERL_PLATFORM" not in engine["env"]  # the rollout does not run verl
    for rank in ranks:
        assert rank["env"]["VERL_PLATFORM"] == platform and rank["env"]["TRINITY_HARDWARE"] == profile
        # the rollout's block is the rollout's
        assert not rollout_env.keys() - {"HCCL_EXEC_TIMEOUT"} & rank["env"].keys()


def test_a_head_publishes_its_address_and_handle_for_its_parts(node):
    from trinity.runtime.rollout.vllm_parts import publish as _publish
    from trinity.runtime.rollout.vllm_parts import wait_for as _wait_for

    @ray.remote(num_cpus=0)
    class Head:
        def generate(self, ids):
            return ("head", ids)

    head = Head.remote()
    _publish("trinity/test/rollout.engine0/m/0", (("10.0.0.1", 29600), head))
    address, handle = _wait_for("trinity/test/rollout.engine0/m/0", 5)
    assert address == ("10.0.0.1", 29600) and ray.get(handle.generate.remote([1])) == ("head", [1])
    with pytest.raises(
        TimeoutError, match=r"did not publish its address \(trinity/test/rollout.engine1/m/0\) within 0.5 s"
    ):
        _wait_for("trinity/test/rollout.engine1/m/0", 0.5)
