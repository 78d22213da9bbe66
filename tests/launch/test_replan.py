"""A run's stages in one launch (Launch.replan): the next stage keeps the groups and actors its plan names exactly as
they run, their processes take the new stage's arguments (restage), and everything else is replaced, on a real Ray
with simulated GPUs."""

import time

import pytest
import ray

from tests.conftest import ray_cluster
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.launch.launcher import Launch
from trinity.launch.plan import build_plan

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def node():
    with ray_cluster({"num_cpus": 12, "num_gpus": 8}) as c:
        ray.init(address=c.address, log_to_driver=False)
        try:
            yield c
        finally:
            ray.shutdown()


def classes() -> tuple[type, type]:
    """Defined in a function: Ray then ships them by value (the tests folder is not importable in its workers)."""

    class Stand:
        """A role that reports its process and the stage it was given; it refuses a restage when told to."""

        def __init__(self, *, name, role, visible_devices_env, workdir, stage, refuse=()):
            self.name, self.stage, self.refuse = name, stage, refuse

        def restage(self, **kwargs):
            if self.name in kwargs.get("refuse", ()):
                return False
            self.__init__(**kwargs)
            return True

        def report(self):
            import os

            return {"pid": os.getpid(), "stage": self.stage}

    class Other(Stand):
        """Another role class under the same actor name."""

    return Stand, Other


def plan(*overrides: str, minimal_file):
    return build_plan(
        resolve(Request(minimal_file, ("hardware=a100", "explorer.rollout_model.engine_num=2", *overrides))).config
    )


def reports(actors: dict) -> dict:
    return dict(zip(actors, ray.get([a.report.remote() for a in actors.values()], timeout=60)))


def test_the_next_stage_keeps_what_its_plan_names_alike_and_replaces_the_rest(node, minimal_file):
    Stand, Other = classes()
    first, second = plan(minimal_file=minimal_file), plan("cluster.gpu_per_node=6", minimal_file=minimal_file)
    with Launch(None, 60) as launch:
        launch.create_groups() if launch.replan(first) == first else pytest.fail("a fresh launch creates everything")
        before = reports(launch.start_actors(lambda spec: (Stand, {"stage": "first"})))
        assert launch.kept == ()

        pending = launch.replan(second)
        # the trainer group went from 6 devices to 4: it and its ranks are new; the rollout group and the roles
        # without a group are the same specs
        assert [g.name for g in pending.placement_groups] == ["trainer_node0"]
        assert [a.name for a in pending.actors] == [f"trainer_node0.rank{i}" for i in range(4)]
        assert launch.kept == ("rollout.engine0", "rollout.engine1", "explorer", "buffer")
        launch.create_groups()
        refuse = ("rollout.engine1",)
        after = reports(
            launch.start_actors(
                lambda spec: (Other if spec.role == "explorer" else Stand, {"stage": "second", "refuse": refuse})
            )
        )
        assert launch.kept == ("rollout.engine0", "buffer")
        assert list(after) == [a.name for a in second.actors]
        assert {r["stage"] for r in after.values()} == {"second"}
        same = {name for name in after if before.get(name, {}).get("pid") == after[name]["pid"]}
        assert same == {"rollout.engine0", "buffer"}  # engine1 refused, the explorer's class changed
        deadline = time.monotonic() + 30  # Ray frees a removed group's devices a moment later
        while ray.available_resources().get("GPU") != 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ray.available_resources().get("GPU") == 2  # 4 ranks and 2 engines hold 6 of 8: the old ranks are gone
    deadline = time.monotonic() + 30
    while ray.available_resources().get("GPU") != 8 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray.available_resources().get("GPU") == 8  # the run's end removes everything, kept or not


def test_a_stage_with_another_env_for_a_role_starts_that_role_anew(node, minimal_file):
    first = plan(minimal_file=minimal_file)
    second = plan("explorer.env_vars.VLLM_LOGGING_LEVEL=DEBUG", minimal_file=minimal_file)
    Stand, _ = classes()
    changed = {a.name for a in second.actors if a.env != next(b for b in first.actors if b.name == a.name).env}
    assert changed == {"rollout.engine0", "rollout.engine1"}  # explorer.env_vars are the engines' variables
    with Launch(None, 60) as launch:
        launch.replan(first)
        launch.create_groups()
        launch.start_actors(lambda spec: (Stand, {"stage": "first"}))
        pending = launch.replan(second)
        assert {a.name for a in pending.actors} == changed
        assert set(launch.kept) == {a.name for a in second.actors} - changed


def staged(devices: str, minimal_file) -> tuple:
    """The plans of a train-only stage and the RL stage after it, the first on `devices`
    (cluster.train_stage_devices)."""
    overrides = (
        f"cluster.train_stage_devices={devices}",
        "+stages=[{stage_name: sft, mode: train}, {stage_name: rl}]",
    )
    resolved = resolve(Request(minimal_file, ("hardware=a100", "explorer.rollout_model.engine_num=2", *overrides)))
    return build_plan(resolved.stage("sft")), build_plan(resolved.stage("rl"))


def gpus_free(expected: float) -> float:
    deadline = time.monotonic() + 30  # Ray's view of what is free trails a change by a heartbeat
    while ray.available_resources().get("GPU", 0) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    return ray.available_resources().get("GPU", 0)


def test_the_next_stages_actors_start_beside_a_stage_on_the_trainers_share_and_are_kept(node, minimal_file):
    Stand, _ = classes()
    sft, rl = staged("trainer", minimal_file)
    assert [a.name for a in sft.actors] == [f"trainer_node0.rank{i}" for i in range(6)] + ["buffer"]
    with Launch(None, 60) as launch:
        launch.replan(sft)
        launch.create_groups()
        roles = launch.start_actors(lambda spec: (Stand, {"stage": "sft"}))
        early = launch.prestart(rl, lambda spec: (Stand, {"stage": "early"}))
        assert early == ("rollout.engine0", "rollout.engine1", "explorer")
        assert list(roles) == [a.name for a in sft.actors]  # the running stage's roles are still its own
        assert gpus_free(0) == 0  # the engines hold the 2 devices SFT leaves
        started = reports({name: launch.actors[name] for name in early})
        assert launch.prestart(rl, lambda spec: (Stand, {"stage": "again"})) == ()  # nothing is started twice
        pending = launch.replan(rl)
        assert (pending.placement_groups, pending.actors) == ((), ())
        assert launch.kept == tuple(a.name for a in rl.actors)
        after = reports(launch.start_actors(lambda spec: (Stand, {"stage": "rl"})))
        assert {r["stage"] for r in after.values()} == {"rl"}
        assert all(after[name]["pid"] == started[name]["pid"] for name in early)
    assert gpus_free(8) == 8  # the run's end removes what it started early too


def test_what_does_not_fit_beside_a_stage_is_not_started_early(node, minimal_file):
    Stand, _ = classes()
    sft, rl = staged("all", minimal_file)
    assert sum(a.devices for a in sft.actors) == 8  # SFT on every device: no room for the engines
    with Launch(None, 60) as launch:
        launch.replan(sft)
        launch.create_groups()
        launch.start_actors(lambda spec: (Stand, {"stage": "sft"}))
        assert launch.prestart(rl, lambda spec: (Stand, {"stage": "early"})) == ()
        assert set(launch.actors) == {a.name for a in sft.actors}
        assert set(launch.groups) == {"trainer_node0"}


def sft_then_early(launch: Launch, role: type, early: type, minimal_file):
    """The SFT stage running as `role` actors, the RL stage's new actors started early as `early` ones; the RL plan."""
    sft, rl = staged("trainer", minimal_file)
    launch.replan(sft)
    launch.create_groups()
    launch.start_actors(lambda spec: (role, {"stage": "sft"}))
    launch.prestart(rl, lambda spec: (early, {"stage": "early"}))
    return rl


def test_an_engine_whose_early_load_failed_is_dropped_for_the_next_stage_to_start_anew(node, minimal_file):
    from trinity.runtime.driver.run import _settle

    Stand, _ = classes()

    class Loader(Stand):
        def setup(self, model_path, version):
            if model_path == "missing":
                raise FileNotFoundError(model_path)
            return version

    with Launch(None, 60) as launch:
        rl = sft_then_early(launch, Stand, Loader, minimal_file)
        loads = {
            "rollout.engine0": launch.actors["rollout.engine0"].setup.remote("missing", 0),
            "rollout.engine1": launch.actors["rollout.engine1"].setup.remote("model", 3),
        }
        _settle(launch, loads)
        assert "rollout.engine0" not in launch.actors and "rollout.engine1" in launch.actors
        pending = launch.replan(rl)
        assert [a.name for a in pending.actors] == ["rollout.engine0"]  # started anew by the stage


def _wait_dead(actor, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.report.remote(), timeout=timeout_s)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    pytest.fail(f"the killed actor still answered after {timeout_s:g} s")


def test_an_actor_started_early_that_died_is_started_anew_by_the_next_stage(node, minimal_file):
    Stand, _ = classes()
    with Launch(None, 60) as launch:
        rl = sft_then_early(launch, Stand, Stand, minimal_file)
        dead = reports({"explorer": launch.actors["explorer"]})["explorer"]["pid"]
        ray.kill(launch.actors["explorer"])
        _wait_dead(launch.actors["explorer"])  # ray.kill lands asynchronously: a restage sent first could still run
        launch.replan(rl)
        after = reports(launch.start_actors(lambda spec: (Stand, {"stage": "rl"})))
        assert after["explorer"]["stage"] == "rl" and after["explorer"]["pid"] != dead
        assert "explorer" not in launch.kept and "rollout.engine0" in launch.kept
