"""Rules of trinity/config/derive/sync.py, each through `trinity config render/validate`:
the weight-sync method, its channel and world size, the explorer's and trainer's intervals, and the evaluation
interval.
"""

import pytest

from tests.conftest import MINIMAL


@pytest.mark.parametrize("profile,backend", [("ascend910b", "hccl"), ("a100", "nccl"), ("cpu", "gloo")])
def test_online_becomes_the_hardware_collective(render, profile, backend):
    result, cfg = render("algorithm:\n  repeat_times: 4\nsynchronizer:\n  sync_method: online\n", f"hardware={profile}")
    assert cfg["synchronizer"]["sync_method"] == backend and result.err == ""


def test_online_is_the_default(render):
    assert render("", "hardware=ascend910c")[1]["synchronizer"]["sync_method"] == "hccl"


def test_other_vendor_collective_is_corrected_with_a_warning(render):
    result, cfg = render("synchronizer:\n  sync_method: hccl\n", "hardware=a100")
    assert cfg["synchronizer"]["sync_method"] == "nccl"
    assert (
        "warning: run.yaml:4:3: synchronizer.sync_method: 'hccl' is not the collective backend of a100, which is 'nccl'"
        in result.err
    )
    assert "write sync_method: online" in result.err


def test_other_vendor_collective_is_an_error_under_strict(cli, write):
    path = write("run.yaml", MINIMAL + "synchronizer:\n  sync_method: nccl\n")
    result = cli("config", "validate", "-c", path, "hardware=ascend910b", "--strict")
    assert result.code == 2
    assert (
        "error: run.yaml:4:3: synchronizer.sync_method: 'nccl' is not the collective backend of ascend910b"
        in result.err
    )
    assert "(an error under --strict)" in result.err


def test_offline_is_checkpoint(render):
    cfg = render("synchronizer:\n  sync_method: offline\n", "hardware=a100")[1]
    assert cfg["synchronizer"]["sync_method"] == "checkpoint" and cfg["synchronizer"]["weight_sync_world_size"] is None


@pytest.mark.parametrize("mode,method", [("train", "checkpoint"), ("explore", "checkpoint"), ("colocate", "memory")])
def test_collective_outside_both_mode_is_replaced_with_a_note(render, mode, method):
    result, cfg = render(f"mode: {mode}\nsynchronizer:\n  sync_method: online\n", "hardware=a100")
    assert cfg["synchronizer"]["sync_method"] == method
    assert (
        "note: run.yaml:5:3: synchronizer.sync_method: a collective sync needs explorer and trainer running side by "
        f"side; in mode '{mode}' it becomes '{method}'" in result.err
    )


def test_memory_in_a_run_without_both_trainer_and_engines_goes_through_checkpoint_files(render):
    """A train run and an explore run of one directory meet through files: memory sync needs both in one run."""
    result, cfg = render("mode: train\nsynchronizer:\n  sync_method: memory\n", "hardware=a100")
    assert (cfg["synchronizer"]["sync_method"], cfg["synchronizer"]["sync_channel"]) == ("checkpoint", "files")
    assert (
        "note: run.yaml:5:3: synchronizer.sync_method: a memory sync needs trainer and engines in one run; in mode "
        "'train' it becomes 'checkpoint'" in result.err
    )


@pytest.mark.parametrize(
    "profile,mode,method,channel",
    [
        ("a100", "both", "online", "process_group"),
        ("a100", "colocate", "online", "device_ipc"),  # CUDA IPC: the engines map the trainer's device buffers
        ("ascend910b", "colocate", "online", "device_ipc"),  # torch_npu's NPU IPC, on a driver that has it
        ("cpu", "colocate", "online", "object_store"),  # no device memory to map
        ("a100", "both", "memory", "object_store"),  # engines on devices of their own: through host memory
        ("a100", "both", "checkpoint", "files"),
        ("a100", "explore", "online", "files"),
    ],
)
def test_the_channel_follows_the_method_the_mode_and_whether_the_platform_maps_device_memory(
    render, ascend_driver_here, profile, mode, method, channel
):
    ascend_driver_here("25.3.rc1")
    cfg = render(f"mode: {mode}\nsynchronizer:\n  sync_method: {method}\n", f"hardware={profile}")[1]
    assert cfg["synchronizer"]["sync_channel"] == channel


@pytest.mark.parametrize(
    "driver,why",
    [
        ("25.2.0", "driver release 25.2.0 ({root}/driver/version.info) is older than 25.3.rc1"),
        (None, "no npu driver release found on this node"),
    ],
)
def test_an_npu_node_whose_driver_cannot_map_memory_again_syncs_colocate_through_the_object_store(
    render, ascend_driver_here, tmp_path, driver, why
):
    """torch_npu's IPC maps memory a process mapped before (each sync after the first) only with HDK >= 25.3.RC1."""
    if driver:
        ascend_driver_here(driver)
    result, cfg = render("mode: colocate\n", "hardware=ascend910b")
    assert cfg["synchronizer"]["sync_channel"] == "object_store" and result.code == 0
    assert (
        "synchronizer.sync_channel: 'object_store' (Ray's object store, through host memory), not 'device_ipc': "
        + why.format(root=tmp_path / "Ascend")
    ) in " ".join(result.err.split())
    assert [line.split(":")[0] for line in result.err.splitlines() if "synchronizer.sync_channel:" in line] == ["note"]
    assert "install the npu driver release 25.3.rc1 or newer (trinity doctor shows this node's)" in result.err


def test_the_channel_is_explained_and_refused_when_set_by_hand(cli, render, write):
    path = write("run.yaml", MINIMAL + "mode: colocate\n")
    explained = cli("config", "render", "-c", path, "hardware=h200", "--explain", "synchronizer.sync_channel").out
    assert "rule sync_channel" in explained and "'device_ipc'  <- synchronizer.sync_method='memory'" in explained
    assert "platform cuda.device_ipc=True (CUDA IPC handles" in explained
    assert "this node:" not in explained  # device IPC on GPUs depends on no driver release
    result, _ = render("synchronizer:\n  sync_channel: files\n", "hardware=a100")
    assert result.code == 2
    assert (
        "error: run.yaml:4:3: synchronizer.sync_channel: is derived ('process_group': from sync_method, mode and the "
        "platform) and must not be set to 'files'" in result.err
    )


def test_weight_sync_world_size_is_rollout_plus_one(render):
    cfg = render("explorer:\n  rollout_model:\n    engine_num: 3\n    tensor_parallel_size: 2\n", "hardware=h100")[1]
    assert cfg["cluster"]["rollout_gpu_num"] == 6 and cfg["synchronizer"]["weight_sync_world_size"] == 7


def test_eval_interval_is_rounded_to_a_multiple_of_the_sync_interval(render):
    result, cfg = render(
        "algorithm:\n  repeat_times: 4\nexplorer:\n  eval_interval: 10\nsynchronizer:\n  sync_interval: 4\n",
        "hardware=a100",
    )
    assert cfg["explorer"]["eval_interval"] == 8
    assert (
        "warning: run.yaml:6:3: explorer.eval_interval: 10 is not a multiple of synchronizer.sync_interval=4; "
        "using 8" in result.err
    )
    # upstream rounds to the explorer's interval where it differs from sync_interval
    result, cfg = render(
        "algorithm:\n  repeat_times: 4\nexplorer:\n  eval_interval: 10\nsynchronizer:\n  sync_style: trainer_driven\n"
        "  explorer_sync_interval: 3\n",
        "hardware=a100",
    )
    assert cfg["explorer"]["eval_interval"] == 9 and "synchronizer.explorer_sync_interval=3; using 9" in result.err


def test_explorer_and_trainer_intervals_default_to_sync_interval_and_say_so(cli, render, write):
    result, cfg = render("synchronizer:\n  sync_interval: 3\n", "hardware=cpu")
    assert result.code == 0
    assert (cfg["synchronizer"]["explorer_sync_interval"], cfg["synchronizer"]["trainer_sync_interval"]) == (3, 3)
    path = write("run.yaml", MINIMAL + "synchronizer:\n  sync_interval: 3\n")
    explained = cli("config", "render", "-c", path, "--explain", "synchronizer.trainer_sync_interval").out
    assert "rule sync_intervals" in explained and "synchronizer.sync_interval=3 (run.yaml:4:" in explained
    # a value a person writes is kept
    result, cfg = render(
        "synchronizer:\n  sync_style: explorer_driven\n  explorer_sync_interval: 4\n  trainer_sync_interval: 2\n",
        "hardware=cpu",
    )
    assert result.code == 0
    assert (cfg["synchronizer"]["explorer_sync_interval"], cfg["synchronizer"]["trainer_sync_interval"]) == (4, 2)


def test_intervals_apart_under_fixed_are_refused_where_written(render):
    result, _ = render("synchronizer:\n  sync_interval: 2\n  trainer_sync_interval: 1\n", "hardware=cpu")
    assert result.code == 2
    assert (
        "error: run.yaml:5:3: synchronizer.trainer_sync_interval: explorer_sync_interval=2 and "
        "trainer_sync_interval=1 differ under sync_style 'fixed'" in result.err
    )
    assert "hint: set both to one value" in result.err and "use sync_style trainer_driven or explorer_driven" in (
        " ".join(result.err.split())
    )
    # one interval under another name is fine; a mode without a trainer beside the explorer has no such wait
    assert (
        render("synchronizer:\n  explorer_sync_interval: 2\n  trainer_sync_interval: 2\n", "hardware=cpu")[0].code == 0
    )
    assert render("mode: explore\nsynchronizer:\n  trainer_sync_interval: 3\n", "hardware=cpu")[0].code == 0
    result, _ = render("synchronizer:\n  sync_style: trainer_driven\n  explorer_sync_interval: 0\n", "hardware=cpu")
    assert result.code == 2 and "run.yaml:5:3: synchronizer.explorer_sync_interval: input should be greater than 0" in (
        result.err
    )


def test_config_diff_shows_the_separate_intervals(cli, write):
    path = write("run.yaml", MINIMAL + "synchronizer:\n  sync_style: trainer_driven\n")
    result = cli("config", "diff", "-c", path, "hardware=cpu", "--vs", "synchronizer.explorer_sync_interval=3")
    assert result.code == 1 and "~ synchronizer.explorer_sync_interval: 1 -> 3" in result.out
    assert "trainer_sync_interval" not in result.out


@pytest.mark.parametrize("profile", ["a100", "ascend910b"])
def test_fully_async_runs_its_batches_in_flight_and_is_refused_where_the_roles_take_turns(cli, render, write, profile):
    result, cfg = render(
        "synchronizer:\n  sync_style: fully_async\nexplorer:\n  max_inflight_batches: 3\n", f"hardware={profile}"
    )
    assert result.code == 0, result.err
    assert (cfg["synchronizer"]["sync_style"], cfg["explorer"]["max_inflight_batches"]) == ("fully_async", 3)
    result, _ = render("mode: colocate\nsynchronizer:\n  sync_style: fully_async\n", f"hardware={profile}")
    assert result.code == 2
    assert (
        "error: run.yaml:5:3: synchronizer.sync_style: 'fully_async' cannot run in mode 'colocate', where the engines "
        "sleep while the trainer steps" in " ".join(result.err.split())
    )
    assert "allowed: fixed, trainer_driven, explorer_driven" in result.err
    # read under fully_async only, as upstream: set under another style, a note says it changes nothing
    result, _ = render("explorer:\n  max_inflight_batches: 4\n", f"hardware={profile}")
    assert result.code == 0
    assert "note: run.yaml:4:3: explorer.max_inflight_batches: changes nothing under sync_style 'fixed'" in result.err
    assert render("explorer:\n  max_inflight_batches: 0\n", f"hardware={profile}")[0].code == 2
    path = write("run.yaml", MINIMAL + "synchronizer:\n  sync_style: fully_async\n")
    explained = cli("config", "render", "-c", path, "--explain", "explorer.max_inflight_batches").out
    assert "explorer.max_inflight_batches = 2" in explained and "schema default" in explained
    schema = cli("config", "schema").out
    assert "fully_async: explore steps run at once" in schema and '"fully_async"' in schema
    diff = cli("config", "diff", "-c", path, f"hardware={profile}", "--vs", "explorer.max_inflight_batches=4")
    assert diff.code == 1 and "~ explorer.max_inflight_batches: 2 -> 4" in diff.out
