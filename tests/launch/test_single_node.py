"""The RFC's reference config launched unchanged on one simulated Ascend 910B node and one A100 node
(a single Ray node declaring 8 NPU and 8 GPU)."""

import os
import time

import pytest
import ray

from tests.conftest import MINIMAL, REFERENCE, ray_cluster
from trinity.launch.launcher import Launch

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def node():
    with ray_cluster({"num_cpus": 12, "num_gpus": 8, "resources": {"NPU": 8}}) as c:
        yield c


@pytest.mark.parametrize(
    "profile,device,visible_env",
    [("ascend910b", "npu", "ASCEND_RT_VISIBLE_DEVICES"), ("a100", "cuda", "CUDA_VISIBLE_DEVICES")],
)
def test_reference_config_launches(cli, node, monkeypatch, profile, device, visible_env):
    monkeypatch.setenv("RAY_ADDRESS", node.address)
    result = cli("run", "--placement-only", "--config", REFERENCE, f"hardware={profile}", "--format", "json")
    assert result.code == 0, result.err
    report = result.json()
    assert report["plan"]["visible_devices_env"] == visible_env
    found = {p["actor"]: p for p in report["placements"]}
    assert set(found) == {
        "trainer_node0.rank0",
        "trainer_node0.rank1",
        *(f"rollout.engine{i}" for i in range(4)),
        "explorer",
        "buffer",
    }
    assert all(p["problem"] == "" and p["device"] == device for p in found.values())
    devices = [found[name]["visible_devices"] for name in found if name.startswith(("rollout", "trainer"))]
    assert len(set(devices)) == 6  # six distinct devices: 4 rollout + 2 trainer
    assert "nothing was trained" in result.err


def test_text_run_shows_plan_and_placements(cli, node, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", node.address)
    result = cli(
        "run", "--placement-only", "--config", REFERENCE, "hardware=ascend910b", "explorer.rollout_model.engine_num=1"
    )
    assert result.code == 0, result.err
    assert "fits the cluster:" in result.out and "rollout.engine0" in result.out
    assert result.out.count(" ok\n") == 8  # 1 rollout engine, 5 trainer ranks (6 - 1), explorer, buffer


def test_a_real_run_masks_credentials_and_the_actors_still_get_them(cli, node, write, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", node.address)
    inside = []  # what each actor's process holds in HF_TOKEN, asked before the launch tears down
    placements = Launch.placements

    def ask_then_check(self):
        inside.append(
            {
                name: ray.get(actor.__ray_call__.remote(lambda _: os.environ.get("HF_TOKEN")))
                for name, actor in self.actors.items()
            }
        )
        return placements(self)

    monkeypatch.setattr(Launch, "placements", ask_then_check)
    path = write("run.yaml", MINIMAL + "explorer:\n  env_vars:\n    HF_TOKEN: hf_PLANTED\n")
    text = cli("run", "--placement-only", "-c", path, "hardware=ascend910b")
    as_json = cli("run", "--placement-only", "-c", path, "hardware=ascend910b", "--format", "json")
    assert text.code == 0 and as_json.code == 0, text.err + as_json.err
    assert " HF_TOKEN=*** TRINITY_DEVICE=npu" in text.out and text.out.count(" ok\n") == 10
    assert {a["env"]["HF_TOKEN"] for a in as_json.json()["plan"]["actors"] if a["role"] == "rollout"} == {"***"}
    assert "PLANTED" not in text.out + text.err + as_json.out + as_json.err
    for run in inside:
        assert run["rollout.engine0"] == "hf_PLANTED" and run["trainer_node0.rank0"] is None


def test_teardown_closes_the_actors_that_can_close_before_killing_them(node, tmp_path, minimal_file):
    """Engines start processes of their own (vLLM's) and close them; the other roles are killed at once, so a role
    stuck in a collective does not hold up the end of a failed run."""
    from trinity.config.compose import Request
    from trinity.config.resolve import resolve
    from trinity.launch.plan import build_plan

    class Plain:  # defined here: Ray ships it by value (the tests folder is not importable in its workers)
        def __init__(self, *, name, role, visible_devices_env, workdir, folder):
            self.name, self.folder = name, folder

        def report(self):
            return {}

    class Closing(Plain):
        """A role whose close leaves a mark."""

        def close(self):
            import pathlib

            (pathlib.Path(self.folder) / self.name).write_text("closed")

    ray.init(address=node.address, log_to_driver=False)
    try:
        plan = build_plan(
            resolve(Request(minimal_file, ("hardware=a100", "explorer.rollout_model.engine_num=2"))).config
        )
        with Launch(plan, 60) as launch:
            launch.create_groups()
            actors = launch.start_actors(
                lambda spec: (Closing if spec.role == "rollout" else Plain, {"folder": str(tmp_path)})
            )
            ray.get([a.report.remote() for a in actors.values()], timeout=60)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["rollout.engine0", "rollout.engine1"]
        deadline = time.monotonic() + 30  # Ray frees a removed group's resources a moment later
        while ray.available_resources().get("GPU") != 8 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ray.available_resources().get("GPU") == 8  # every actor was killed and every group removed
    finally:
        ray.shutdown()
