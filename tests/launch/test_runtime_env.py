"""Each role's runtime_env carries the device decision, the profile and the role's variables."""

import pytest

from tests.conftest import REFERENCE
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.launch.runtime_env import role_env, runtime_env


@pytest.fixture(scope="module")
def ascend():
    return resolve(Request(REFERENCE, ("hardware=ascend910b",))).config


def test_roles_get_common_plus_their_own(ascend):
    trainer = runtime_env(ascend, "trainer", exported={})["env_vars"]
    rollout = runtime_env(ascend, "rollout", exported={})["env_vars"]
    explorer = runtime_env(ascend, "explorer", exported={})["env_vars"]
    assert trainer["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True" and "PYTORCH_NPU_ALLOC_CONF" not in rollout
    assert rollout["VLLM_ASCEND_ENABLE_NZ"] == "0" and "VLLM_ASCEND_ENABLE_NZ" not in trainer
    for env in (trainer, rollout, explorer):
        assert (
            env["TRINITY_DEVICE"] == "npu"
            and env["TRINITY_HARDWARE"] == "ascend910b"
            and env["HCCL_EXEC_TIMEOUT"] == "1800"
        )
    assert "TASK_QUEUE_ENABLE" not in explorer


def test_a_variable_exported_in_the_driver_wins_and_says_so(ascend):
    env = role_env(ascend, "trainer", exported={"HCCL_CONNECT_TIMEOUT": "3600", "UNRELATED": "x"})
    assert env["HCCL_CONNECT_TIMEOUT"] == ("3600", "exported in the driver's environment")
    assert env["CPU_AFFINITY_CONF"] == ("1", "env.trainer") and "UNRELATED" not in env


def test_unknown_role(ascend):
    with pytest.raises(ValueError, match="unknown role 'critic'"):
        runtime_env(ascend, "critic")


def test_an_external_models_url_and_key_go_to_the_explorer_alone(ascend):
    """model.external_model: the driver's values of the variables it names reach the explorer (which asks the API) and
    no other role; one the driver lacks stays unset, and the key's variable is the one masked where the plan shows."""
    from trinity.launch.runtime_env import secret_vars

    external = ascend.model.external_model.model_copy(
        update={"enable": True, "model_name": "qwen3-max", "api_key_env": "MY_CRED"}
    )
    config = ascend.model_copy(update={"model": ascend.model.model_copy(update={"external_model": external})})
    exported = {"OPENAI_BASE_URL": "https://api.example/v1", "MY_CRED": "sk-1"}
    explorer = role_env(config, "explorer", exported=exported)
    assert explorer["OPENAI_BASE_URL"] == ("https://api.example/v1", "exported in the driver's environment")
    assert explorer["MY_CRED"] == ("sk-1", "exported in the driver's environment")
    for role in ("trainer", "rollout", "buffer"):
        assert not {"OPENAI_BASE_URL", "MY_CRED"} & set(role_env(config, role, exported=exported))
    assert "MY_CRED" not in role_env(config, "explorer", exported={"OPENAI_BASE_URL": "https://api.example/v1"})
    assert secret_vars(config, "explorer") == ("MY_CRED",) and secret_vars(config, "trainer") == ()
    assert "OPENAI_BASE_URL" not in role_env(ascend, "explorer", exported=exported)  # no external model: not asked
