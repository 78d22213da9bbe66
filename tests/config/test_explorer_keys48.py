"""Trinity-RFT's explorer keys of issue 48 in the config: explorer.dynamic_timeout (enable, ratio, warmup_min_steps),
explorer.runner_state_report_interval and explorer.concurrent_mode, through `trinity config validate/render/diff` as a
user runs them: upstream's defaults, a user's values with where they came from, and bad values at their line."""

import pytest

from tests.conftest import MINIMAL

GOOD = (
    "explorer:\n"
    "  dynamic_timeout:\n"
    "    enable: true\n"
    "    ratio: 2.5\n"
    "    warmup_min_steps: 3\n"
    "  runner_state_report_interval: 10\n"
    "  concurrent_mode: multi-threading\n"
)


def test_the_keys_take_upstreams_defaults(cli, write):
    result = cli("config", "render", "-c", write("run.yaml", MINIMAL), "hardware=cpu", "--format", "json")
    assert result.code == 0, result.err
    explorer = result.json()["explorer"]
    assert explorer["dynamic_timeout"] == {"enable": False, "ratio": 3.0, "warmup_min_steps": 1}
    assert (explorer["runner_state_report_interval"], explorer["concurrent_mode"]) == (0, "sequential")


def test_a_users_values_are_kept_and_explained_by_their_line(cli, write):
    path = write("run.yaml", MINIMAL + GOOD)
    result = cli("config", "render", "-c", path, "hardware=cpu", "--format", "json")
    assert result.code == 0, result.err
    explorer = result.json()["explorer"]
    assert explorer["dynamic_timeout"] == {"enable": True, "ratio": 2.5, "warmup_min_steps": 3}
    assert (explorer["runner_state_report_interval"], explorer["concurrent_mode"]) == (10, "multi-threading")
    keys = (
        "explorer.dynamic_timeout.ratio",
        "explorer.dynamic_timeout.warmup_min_steps",
        "explorer.runner_state_report_interval",
        "explorer.concurrent_mode",
    )
    explained = cli("config", "render", "-c", path, "hardware=cpu", "--explain", *keys)
    assert explained.code == 0, explained.err
    for key, line, default, value in zip(
        keys,
        ("run.yaml:6:5", "run.yaml:7:5", "run.yaml:8:3", "run.yaml:9:3"),
        ("3.0", "1", "0", "'sequential'"),
        ("2.5", "3", "10", "'multi-threading'"),
    ):
        block = explained.out.split(f"{key} = ")[1].split("\n\n")[0]
        assert "schema default" in block and default in block and "(overridden)" in block
        assert line in block and value in block


def test_config_diff_names_each_key_that_differs(cli, write):
    result = cli(
        "config",
        "diff",
        "-c",
        write("run.yaml", MINIMAL + GOOD),
        "hardware=cpu",
        "--vs",
        "explorer.dynamic_timeout.enable=false",
        "explorer.runner_state_report_interval=0",
        "explorer.concurrent_mode=sequential",
    )
    assert result.code == 1, result.err
    assert "~ explorer.dynamic_timeout.enable: True -> False" in result.out
    assert "~ explorer.runner_state_report_interval: 10 -> 0" in result.out
    assert "~ explorer.concurrent_mode: 'multi-threading' -> 'sequential'" in result.out
    assert "ratio" not in result.out


@pytest.mark.parametrize(
    "text, where, message, allowed",
    [
        (
            "explorer:\n  dynamic_timeout:\n    ratio: 0\n",
            "run.yaml:5:5: explorer.dynamic_timeout.ratio",
            "input should be greater than 0 (got 0)",
            "allowed: > 0.0",
        ),
        (
            "explorer:\n  dynamic_timeout:\n    warmup_min_steps: -1\n",
            "run.yaml:5:5: explorer.dynamic_timeout.warmup_min_steps",
            "input should be greater than or equal to 0 (got -1)",
            "allowed: >= 0",
        ),
        (
            "explorer:\n  dynamic_timeout:\n    enable: sometimes\n",
            "run.yaml:5:5: explorer.dynamic_timeout.enable",
            "input should be a valid boolean",
            "",
        ),
        (
            "explorer:\n  runner_state_report_interval: -5\n",
            "run.yaml:4:3: explorer.runner_state_report_interval",
            "input should be greater than or equal to 0 (got -5)",
            "allowed: >= 0",
        ),
        (
            "explorer:\n  concurrent_mode: threads\n",
            "run.yaml:4:3: explorer.concurrent_mode",
            "input should be 'sequential' or 'multi-threading' (got 'threads')",
            "allowed: 'sequential' or 'multi-threading'",
        ),
        (
            "explorer:\n  dynamic_timeout:\n    timeout: 5\n",
            "run.yaml:5:5: explorer.dynamic_timeout.timeout",
            "",
            "",
        ),
    ],
)
def test_a_bad_value_is_exit_2_at_its_line(cli, write, text, where, message, allowed):
    result = cli("config", "validate", "-c", write("run.yaml", MINIMAL + text), "hardware=cpu")
    assert result.code == 2 and result.err.startswith("trinity: 1 problem in the config\n"), result.err
    assert f"error: {where}: {message}" in result.err
    assert allowed in result.err


def test_asynchronous_is_refused_by_name_with_the_reason_and_what_runs(cli, write):
    result = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", MINIMAL + "explorer:\n  concurrent_mode: asynchronous\n"),
        "hardware=cpu",
    )
    assert result.code == 2, result.err
    assert (
        "error: run.yaml:4:3: explorer.concurrent_mode: known Trinity-RFT value, not supported by trinity yet: "
        "'asynchronous'" in result.err
    )
    assert "hint: trinity's workflows are synchronous" in result.err and "multi-threading plays" in result.err


def _notes(result) -> list[str]:
    return [line for line in result.err.splitlines() if line.startswith("note: run.yaml")]


@pytest.mark.parametrize("mode", ["train", "serve"])
def test_in_a_mode_whose_explorer_runs_no_workflow_each_key_written_is_noted(cli, write, mode):
    text = f"mode: {mode}\n" + MINIMAL + GOOD
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 0, result.err
    noted = {line.split(": ")[2] for line in _notes(result) if "its explorer runs no workflow" in line}
    assert noted == {
        "explorer.runner_state_report_interval",
        "explorer.concurrent_mode",
        "explorer.dynamic_timeout.enable",
        "explorer.dynamic_timeout.ratio",
        "explorer.dynamic_timeout.warmup_min_steps",
    }
    assert f"changes nothing in mode '{mode}'" in result.err


def test_the_dynamic_timeout_is_noted_in_bench_and_its_settings_while_it_is_off(cli, write):
    bench = cli("config", "validate", "-c", write("run.yaml", "mode: bench\n" + MINIMAL + GOOD), "hardware=cpu")
    assert bench.code == 0, bench.err
    [note] = _notes(bench)
    assert "explorer.dynamic_timeout.enable: changes nothing in mode 'bench'" in note
    off = "explorer:\n  dynamic_timeout:\n    ratio: 2\n    warmup_min_steps: 4\n"
    result = cli("config", "validate", "-c", write("run.yaml", MINIMAL + off), "hardware=cpu")
    assert result.code == 0, result.err
    assert [n.split(": ", 3)[2:] for n in _notes(result)] == [
        [key, "changes nothing: explorer.dynamic_timeout.enable is false (explorer.max_timeout applies)"]
        for key in ("explorer.dynamic_timeout.ratio", "explorer.dynamic_timeout.warmup_min_steps")
    ]
    on = cli("config", "validate", "-c", write("run.yaml", MINIMAL + GOOD), "hardware=cpu")
    assert on.code == 0 and _notes(on) == [], on.err  # in mode both every key is read


OVER = "synchronizer:\n  sync_style: explorer_driven\nexplorer:\n  over_rollout:\n    ratio: 0.25\n"


@pytest.mark.parametrize("profile", ["a100", "ascend910b"])
def test_over_rollout_takes_upstreams_defaults_and_a_users_values_with_their_line(cli, write, profile):
    result = cli("config", "render", "-c", write("run.yaml", MINIMAL), f"hardware={profile}", "--format", "json")
    assert result.json()["explorer"]["over_rollout"] == {
        "ratio": 0.0,
        "wait_after_min": 30.0,
        "return_partial_tasks": False,
    }
    path = write("run.yaml", MINIMAL + OVER + "    wait_after_min: 5\n    return_partial_tasks: true\n")
    result = cli("config", "render", "-c", path, f"hardware={profile}", "--format", "json")
    assert result.code == 0, result.err
    assert result.json()["explorer"]["over_rollout"] == {
        "ratio": 0.25,
        "wait_after_min": 5.0,
        "return_partial_tasks": True,
    }
    explained = cli("config", "render", "-c", path, f"hardware={profile}", "--explain", "explorer.over_rollout.ratio")
    assert "run.yaml:7:5" in explained.out and "0.25" in explained.out
    diff = cli("config", "diff", "-c", path, f"hardware={profile}", "--vs", "explorer.over_rollout.ratio=0.5")
    assert diff.code == 1 and "~ explorer.over_rollout.ratio: 0.25 -> 0.5" in diff.out
    schema = cli("config", "schema").out
    assert "Share of a training explore step's tasks it need not wait for" in schema


@pytest.mark.parametrize(
    "text,where,message",
    [
        ("    ratio: 1.0\n", "run.yaml:7:5", "input should be less than 1 (got 1.0)"),
        ("    ratio: -0.1\n", "run.yaml:7:5", "input should be greater than or equal to 0 (got -0.1)"),
        ("    wait_after_min: -1\n", "run.yaml:7:5", "input should be greater than or equal to 0 (got -1)"),
    ],
)
def test_a_bad_over_rollout_value_is_exit_2_at_its_line(cli, write, text, where, message):
    path = write(
        "run.yaml", MINIMAL + "synchronizer:\n  sync_style: explorer_driven\nexplorer:\n  over_rollout:\n" + text
    )
    result = cli("config", "validate", "-c", path, "hardware=cpu")
    assert result.code == 2 and f"error: {where}: explorer.over_rollout." in result.err and message in result.err


def test_over_rollout_under_fixed_is_refused_where_explorer_and_trainer_take_turns_and_noted_where_it_does_nothing(
    cli, write
):
    fixed = write("run.yaml", MINIMAL + "explorer:\n  over_rollout:\n    ratio: 0.25\n")
    result = cli("config", "validate", "-c", fixed, "hardware=cpu")
    assert result.code == 2
    assert "error: run.yaml:5:5: explorer.over_rollout.ratio: 0.25 leaves tasks of each explore step behind" in (
        result.err
    )
    assert "allowed: 0 under sync_style fixed" in result.err and "explorer_driven or fully_async" in result.err
    # an explore run has no trainer to wait: fixed is fine there
    assert cli("config", "validate", "-c", fixed, "hardware=cpu", "mode=explore").code == 0
    train = cli("config", "validate", "-c", fixed, "hardware=cpu", "mode=train")
    assert train.code == 0 and "explorer.over_rollout.ratio: changes nothing in mode 'train'" in train.err
    idle = write("run.yaml", MINIMAL + "explorer:\n  over_rollout:\n    return_partial_tasks: true\n")
    result = cli("config", "validate", "-c", idle, "hardware=cpu")
    assert result.code == 0
    assert "note: run.yaml:5:5: explorer.over_rollout.return_partial_tasks: changes nothing: " in result.err


@pytest.mark.parametrize("style", ["explorer_driven", "fully_async"])
def test_a_train_batch_larger_than_what_a_steps_quorum_writes_is_refused(cli, write, style):
    """ratio 0.25 of 16 tasks: a step waits for 12, whose 8 rollouts each are 96 experiences; the derived train batch
    (16 x 8 = 128) would leave the stage's last train steps waiting for experiences no explore step makes."""
    path = write("run.yaml", MINIMAL + OVER.replace("explorer_driven", style))
    sized = ("hardware=cpu", "buffer.batch_size=16", "algorithm.repeat_times=8")
    result = cli("config", "validate", "-c", path, *sized)
    assert result.code == 2
    assert (
        "error: run.yaml:7:5: explorer.over_rollout.ratio: 0.25 leaves up to 4 of buffer.batch_size=16 tasks of each "
        "explore step behind: a step may write 12 x algorithm.repeat_times=8 = 96 experiences, fewer than "
        "buffer.train_batch_size=128"
    ) in result.err
    assert "allowed: buffer.train_batch_size <= 96 with this ratio" in result.err
    assert "hint: set buffer.train_batch_size=96" in result.err
    assert cli("config", "validate", "-c", path, *sized, "buffer.train_batch_size=96").code == 0
    assert cli("config", "validate", "-c", path, *sized, "mode=explore").code == 0  # no trainer to wait
