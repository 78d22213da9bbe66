"""Rules of trinity/config/derive/env.py, each through `trinity config render/validate`:
env_when blocks, collective timeouts, explorer env vars.
"""

from tests.conftest import MINIMAL


def test_env_when_blocks_follow_the_config(render):
    eager = render("explorer:\n  rollout_model:\n    enforce_eager: true\n", "hardware=ascend910b")[1]["env"]
    graph = render("explorer:\n  rollout_model:\n    enforce_eager: false\n", "hardware=ascend910b")[1]["env"]
    assert eager["rollout"]["TASK_QUEUE_ENABLE"] == "2" and graph["rollout"]["TASK_QUEUE_ENABLE"] == "1"
    assert eager["trainer"]["TASK_QUEUE_ENABLE"] == "2"
    colocate = render("mode: colocate\n", "hardware=ascend910b")[1]["env"]["common"]
    assert colocate["HCCL_HOST_SOCKET_PORT_RANGE"] == "auto" and colocate["HCCL_NPU_SOCKET_PORT_RANGE"] == "auto"


def test_an_env_when_block_never_replaces_what_you_wrote(render, cli, write):
    text = "explorer:\n  rollout_model:\n    enforce_eager: false\nenv:\n  rollout:\n    TASK_QUEUE_ENABLE: '7'\n"
    result, cfg = render(text, "hardware=ascend910b")
    assert result.code == 0 and cfg["env"]["rollout"]["TASK_QUEUE_ENABLE"] == "7"
    explained = cli(
        "config",
        "render",
        "-c",
        write("run.yaml", MINIMAL + text),
        "hardware=ascend910b",
        "--explain",
        "env.rollout.TASK_QUEUE_ENABLE",
    )
    assert (
        explained.code == 0
        and explained.out.startswith("env.rollout.TASK_QUEUE_ENABLE = '7'\n")
        and "env_when" not in explained.out
    )


def test_collective_timeout_covers_the_sync_timeout(render):
    env = render("synchronizer:\n  sync_timeout: 3600\n", "hardware=ascend910b")[1]["env"]["common"]
    assert env["HCCL_EXEC_TIMEOUT"] == "3600"
    short = render("synchronizer:\n  sync_timeout: 600\n", "hardware=ascend910b")[1]["env"]["common"]
    assert short["HCCL_EXEC_TIMEOUT"] == "1800"  # the profile's value is already long enough


def test_user_env_wins_and_a_short_timeout_warns(render):
    text = (
        "synchronizer:\n  sync_timeout: 3600\nenv:\n  common:\n    HCCL_EXEC_TIMEOUT: '600'\nexplorer:\n  "
        "env_vars:\n    VLLM_ASCEND_ENABLE_NZ: '1'\n"
    )
    result, cfg = render(text, "hardware=ascend910b")
    assert cfg["env"]["common"]["HCCL_EXEC_TIMEOUT"] == "600" and cfg["env"]["rollout"]["VLLM_ASCEND_ENABLE_NZ"] == "1"
    assert (
        "warning: run.yaml:7:5: env.common.HCCL_EXEC_TIMEOUT: HCCL_EXEC_TIMEOUT=600 is shorter than "
        "synchronizer.sync_timeout=3600" in result.err
    )


def test_recommended_values_sit_under_the_users_file(render):
    assert render("", "hardware=ascend910b")[1]["explorer"]["rollout_model"]["gpu_memory_utilization"] == 0.8
    mine = render("explorer:\n  rollout_model:\n    gpu_memory_utilization: 0.5\n", "hardware=ascend910b")[1]
    assert mine["explorer"]["rollout_model"]["gpu_memory_utilization"] == 0.5
    assert (
        render("", "hardware=ascend910b", "explorer.rollout_model.gpu_memory_utilization=0.6")[1]["explorer"][
            "rollout_model"
        ]["gpu_memory_utilization"]
        == 0.6
    )


def test_a_collective_timeout_equal_to_the_sync_timeout_is_enough(render, cli, write):
    mine, cfg = render(
        "synchronizer:\n  sync_timeout: 1800\nenv:\n  common:\n    HCCL_EXEC_TIMEOUT: '1800'\n", "hardware=ascend910b"
    )
    assert mine.code == 0 and mine.err == "" and cfg["env"]["common"]["HCCL_EXEC_TIMEOUT"] == "1800"
    named, cfg = render("env:\n  common:\n    HCCL_EXEC_TIMEOUT: auto\n", "hardware=ascend910b")
    # not a number: yours, unchecked
    assert named.code == 0 and named.err == "" and cfg["env"]["common"]["HCCL_EXEC_TIMEOUT"] == "auto"
    # the profile's 1800 already covers a sync timeout of 1800: no rule rewrites it
    path = write("run.yaml", MINIMAL + "synchronizer:\n  sync_timeout: 1800\n")
    explained = cli("config", "render", "-c", path, "hardware=ascend910b", "--explain", "env.common.HCCL_EXEC_TIMEOUT")
    assert (
        explained.code == 0
        and explained.out.startswith("env.common.HCCL_EXEC_TIMEOUT = '1800'\n")
        and "rule" not in explained.out
    )
