"""The roles table: every consumer reads an entry (the plan's actors, each role's env, the factory's class, the
protocol checks in tests/runtime/roles/test_protocols.py), and an unknown role is named with the ones there are."""

import dataclasses

import pytest

from tests.conftest import REFERENCE
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.launch import roles
from trinity.launch.plan import build_plan
from trinity.launch.runtime_env import role_env
from trinity.runtime.driver.factory import role_class, role_factory
from trinity.runtime.driver.run import run_dir_of
from trinity.runtime.roles.base import Role

# an auxiliary model (a judge) beside the reference's engines: every role has an actor
JUDGE = "explorer.auxiliary_models=[{model_path: /models/judge, engine_num: 1}]"


def resolved(*overrides):
    return resolve(Request(REFERENCE, ("hardware=a100", JUDGE, *overrides))).config


def test_an_unknown_role_is_named_with_the_roles_there_are():
    with pytest.raises(
        ValueError, match="^unknown role 'critic'; roles: trainer, rollout, auxiliary, explorer, buffer$"
    ):
        roles.role("critic")


def test_every_planned_actor_has_an_entry_and_is_ranked_as_its_entry_says():
    plan = build_plan(resolved(), {})
    by_role: dict[str, list] = {}
    for actor in plan.actors:
        by_role.setdefault(actor.role, []).append(actor)
    assert set(by_role) == set(roles.ROLES)
    for name, actors in by_role.items():
        assert roles.role(name).ranked or len(actors) == 1, name


@pytest.mark.parametrize("name", sorted(roles.ROLES))
def test_the_factory_builds_each_role_with_its_entrys_class_and_the_class_own_arguments(name, tmp_path):
    config = resolved()
    cls = role_class(config, name)
    assert issubclass(cls, Role) and cls.plan_arguments.__func__ is not Role.plan_arguments.__func__
    spec = next(a for a in build_plan(config, {}).actors if a.role == name)
    made, kwargs = role_factory(config, tmp_path)(spec)
    assert made is cls and kwargs["log_dir"] == str(tmp_path / "logs")
    assert (kwargs["log_level"], kwargs["log_by_node"]) == ("INFO", False)  # Trinity-RFT's log defaults


def test_the_roles_log_where_and_at_the_level_the_log_section_says(tmp_path):
    config = resolved("+log.level=DEBUG", "+log.group_by_node=true", f"+log.save_dir={tmp_path / 'elsewhere'}")
    spec = next(a for a in build_plan(config, {}).actors if a.role == "trainer")
    _, kwargs = role_factory(config, tmp_path)(spec)
    assert (kwargs["log_dir"], kwargs["log_level"], kwargs["log_by_node"]) == (
        str(tmp_path / "elsewhere"),
        "DEBUG",
        True,
    )
    assert run_dir_of(config).logs == tmp_path / "elsewhere"  # where the driver looks for a failed role's log


def test_a_roles_env_block_is_its_entrys(monkeypatch):
    config = resolved()
    trainer = role_env(config, "trainer", exported={})
    assert "PYTORCH_CUDA_ALLOC_CONF" in trainer and "NCCL_CUMEM_ENABLE" not in trainer
    monkeypatch.setitem(roles.ROLES, "trainer", dataclasses.replace(roles.ROLES["trainer"], env="rollout"))
    swapped = role_env(config, "trainer", exported={})
    assert "NCCL_CUMEM_ENABLE" in swapped and "PYTORCH_CUDA_ALLOC_CONF" not in swapped


def test_only_a_role_that_runs_verl_gets_the_platforms_verl_env(monkeypatch):
    config = resolved()
    assert "VERL_PLATFORM" in role_env(config, "trainer", exported={})
    assert "VERL_PLATFORM" not in role_env(config, "explorer", exported={})
    monkeypatch.setitem(roles.ROLES, "explorer", dataclasses.replace(roles.ROLES["explorer"], verl_platform=True))
    assert role_env(config, "explorer", exported={})["VERL_PLATFORM"] == ("nvidia", "platform cuda")
