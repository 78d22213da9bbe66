"""Rules of trinity/config/derive/replay.py: the replay buffer's settings, through `trinity config render`."""

import pytest

EB = "buffer:\n  trainer_input:\n    experience_buffer:\n      name: e\n"


def test_the_alfworld_examples_replay_buffer_takes_upstreams_defaults(render):
    result, cfg = render(EB + "      replay_buffer: {enable: true}\n      max_read_timeout: 10800\n")
    assert result.code == 0 and result.err == ""
    eb = cfg["buffer"]["trainer_input"]["experience_buffer"]
    assert eb["replay_buffer"] == {
        "enable": True,
        "priority_fn": "linear_decay",
        "priority_fn_args": {"decay": 2.0},
        "reuse_cooldown_time": None,
    }
    assert (eb["capacity"], eb["max_read_timeout"]) == (10000, 10800)


def test_a_priority_functions_arguments_are_completed_and_checked_where_written(render):
    text = EB + "      replay_buffer:\n        enable: true\n        priority_fn: decay_limit_randomization\n"
    _, cfg = render(text + "        priority_fn_args: {sigma: 0.5}\n")
    assert cfg["buffer"]["trainer_input"]["experience_buffer"]["replay_buffer"]["priority_fn_args"] == {
        "decay": 2.0,
        "use_count_limit": 3,
        "sigma": 0.5,
    }
    result, _ = render(text + "        priority_fn_args: {sigma: -1, decay_rate: 3}\n")
    assert result.code == 2
    assert "run.yaml:10:28: buffer.trainer_input.experience_buffer.replay_buffer.priority_fn_args.sigma" in result.err
    assert "priority_fn_args.decay_rate: unknown key (priority function 'decay_limit_randomization')" in result.err
    result, _ = render(EB + "      replay_buffer: {enable: true, priority_fn: newest_first}\n")
    assert result.code == 2 and "replay_buffer.priority_fn: input should be 'linear_decay'" in result.err


@pytest.mark.parametrize(
    "text,key",
    [
        ("      capacity: 50\n", "capacity"),
        ("      replay_buffer: {reuse_cooldown_time: 5}\n", "replay_buffer.reuse_cooldown_time"),
        ("      replay_buffer: {priority_fn_args: {decay: 1.0}}\n", "replay_buffer.priority_fn_args"),
    ],
)
def test_what_only_the_replay_buffer_reads_is_refused_where_it_is_off(render, text, key):
    result, _ = render(EB + text)
    assert result.code == 2
    assert f"buffer.trainer_input.experience_buffer.{key}: only the replay buffer reads it, and it is off" in result.err
    assert "hint: set buffer.trainer_input.experience_buffer.replay_buffer.enable: true" in result.err
    assert render(EB + "      capacity: 10000\n")[0].code == 0  # upstream's default, written, changes nothing


@pytest.mark.parametrize("storage,key", [("storage_type: sql", "storage_type"), ("path: 'sqlite:///b.db'", "path")])
def test_the_replay_buffer_is_the_in_memory_queues(render, storage, key):
    result, _ = render(EB + f"      {storage}\n      replay_buffer: {{enable: true}}\n")
    assert result.code == 2
    assert f"experience_buffer.{key}: the replay buffer serves experiences from memory by priority" in result.err


def test_max_read_timeout_must_be_positive(render):
    result, _ = render(EB + "      max_read_timeout: 0\n")
    assert result.code == 2 and "run.yaml:7:7: buffer.trainer_input.experience_buffer.max_read_timeout" in result.err
