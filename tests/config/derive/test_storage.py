"""Rules of trinity/config/derive/storage.py: keys every data set has that only some kinds read (noted where nothing
reads them, as upstream ignores them there), and the experience buffer's enable_thinking, through `trinity config
render` as a user runs it."""

import pytest

RL = "algorithm:\n  repeat_times: 4\n"
TASKSET = (
    RL + "buffer:\n  explorer_input:\n    default_workflow_type: math_workflow\n    taskset:\n      path: /data/t\n"
)
EB = RL + "buffer:\n  trainer_input:\n    experience_buffer:\n      name: e\n"
MIX = (
    "algorithm:\n  algorithm_type: mix\n  repeat_times: 4\n  sample_strategy_args: {sft_dataset_name: expert}\n"
    "buffer:\n  trainer_input:\n    auxiliary_buffers:\n      expert:\n        path: /tmp\n"
)


@pytest.mark.parametrize(
    "text,key,why",
    [
        (
            TASKSET + "      max_retry_times: 5\n",
            "explorer_input.taskset.max_retry_times",
            "SQL storage (buffer/storage/sql.py: each database operation tried max(1, max_retry_times) times, "
            "max_retry_interval seconds apart); a taskset is a data set read from its path. A workflow that fails is "
            "retried explorer.max_retry_times times",
        ),
        (TASKSET + "      max_retry_interval: 0\n", "explorer_input.taskset.max_retry_interval", "SQL storage"),
        (MIX + "        capacity: 10\n", "trainer_input.auxiliary_buffers.expert.capacity", "only in a queue"),
        (
            MIX + "        max_read_timeout: 60\n",
            "trainer_input.auxiliary_buffers.expert.max_read_timeout",
            "only in a queue",
        ),
        (MIX + "        max_retry_times: 1\n", "trainer_input.auxiliary_buffers.expert.max_retry_times", "SQL storage"),
        (
            MIX + "        format: {workflow_key: wf}\n",
            "trainer_input.auxiliary_buffers.expert.format.workflow_key",
            "TaskFormatter",
        ),
        (
            EB + "      format: {reward_fn_key: r}\n",
            "trainer_input.experience_buffer.format.reward_fn_key",
            "TaskFormatter",
        ),
        (EB + "      max_retry_times: 9\n", "trainer_input.experience_buffer.max_retry_times", "not kept in SQLite"),
        (
            TASKSET + "      format: {enable_concatenated_multi_turn: true}\n",
            "explorer_input.taskset.format.enable_concatenated_multi_turn",
            "a task opens with one prompt",
        ),
    ],
)
def test_a_key_this_kind_of_data_set_does_not_read_is_noted_where_written(render, text, key, why):
    result, _ = render(text)
    assert result.code == 0, result.err
    line = next(line for line in result.err.splitlines() if f"buffer.{key}: changes nothing: " in line)
    assert line.startswith("note: run.yaml:") and why in line
    assert f"hint: remove buffer.{key}" in result.err


@pytest.mark.parametrize("store", ["storage_type: sql", "path: 'sqlite:///e.db'"])
def test_an_sqlite_experience_buffer_reads_its_retries(render, store):
    result, _ = render(EB + f"      {store}\n      max_retry_times: 9\n      max_retry_interval: 2\n")
    assert result.code == 0 and "changes nothing" not in result.err


def test_what_a_kind_of_data_set_does_read_is_not_noted(render):
    text = TASKSET + "      format: {workflow_key: wf, reward_fn_key: r, enable_concatenated_multi_turn: false}\n"
    result, _ = render(text)
    assert result.code == 0 and "changes nothing" not in result.err


def test_the_experience_buffers_thinking_follows_the_models_unless_its_format_says(render, cli, write):
    sft = (
        "mode: train\nalgorithm:\n  algorithm_type: sft\n"
        + EB.removeprefix(RL)
        + "      storage_type: file\n"
        + ("      path: /tmp\n")
    )
    thinking = "model:\n  model_path: /models/tiny\n  enable_thinking: false\n"
    _, cfg = render(thinking + sft)
    assert cfg["buffer"]["trainer_input"]["experience_buffer"]["format"]["enable_thinking"] is False
    _, cfg = render(thinking + sft + "      format: {enable_thinking: true}\n")
    assert cfg["buffer"]["trainer_input"]["experience_buffer"]["format"]["enable_thinking"] is True
    _, cfg = render(sft)
    assert cfg["buffer"]["trainer_input"]["experience_buffer"]["format"]["enable_thinking"] is None
    explained = cli(
        "config",
        "render",
        "-c",
        write("run.yaml", thinking + sft),
        "--explain",
        "buffer.trainer_input.experience_buffer.format.enable_thinking",
    )
    assert "rule data_set_thinking" in explained.out and "model.enable_thinking=False" in explained.out


def test_a_tasksets_own_enable_thinking_is_noted_as_trinitys_not_upstreams(render):
    result, cfg = render(TASKSET + "      format: {enable_thinking: false}\n")
    assert result.code == 0
    assert (
        "buffer.explorer_input.taskset.format.enable_thinking: this taskset's prompts are rendered with "
        "enable_thinking=False" in result.err
    )
    assert "Trinity-RFT 0.6.0 reads a taskset's format.enable_thinking nowhere" in result.err


@pytest.mark.parametrize(
    "text,key,message",
    [
        (TASKSET + "      max_retry_times: -1\n", "taskset.max_retry_times", "greater than or equal to 0"),
        (TASKSET + "      format: {enable_thinking: maybe}\n", "taskset.format.enable_thinking", "valid boolean"),
        (MIX + "        capacity: 0\n", "trainer_input.auxiliary_buffers.expert.capacity", "greater than 0"),
        (
            EB + "      max_retry_interval: soon\n",
            "trainer_input.experience_buffer.max_retry_interval",
            "valid integer",
        ),
    ],
)
def test_bad_values_are_exit_2_where_written(render, text, key, message):
    result, _ = render(text)
    assert result.code == 2
    line = next(line for line in result.err.splitlines() if f".{key}: " in line)
    assert line.startswith("error: run.yaml:") and message in line
