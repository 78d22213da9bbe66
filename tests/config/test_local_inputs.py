"""Data a run reads by local path must be on this machine: `validate` says so in a second; `render` only describes."""

import json

from tests.conftest import REFERENCE


def gsm8k_folder(tmp_path):
    folder = tmp_path / "gsm8k"
    folder.mkdir()
    for split in ("train", "test"):
        (folder / f"{split}.jsonl").write_text(json.dumps({"question": "1+1?", "answer": "#### 2"}) + "\n")
    return folder


def test_a_missing_data_file_is_a_local_path_never_a_hub_name(cli):
    """`data/gsm8k.jsonl` could be written as a hub id, but a data file's suffix says it is a file that is not here
    (hub names: tests/config/hub/test_issues.py)."""
    result = cli(
        "config", "validate", "-c", REFERENCE, "hardware=a100", "buffer.explorer_input.taskset.path=data/x.jsonl"
    )
    assert result.code == 2
    assert (
        "override 'buffer.explorer_input.taskset.path=data/x.jsonl': buffer.explorer_input.taskset.path: "
        "'data/x.jsonl' is not on this machine" in result.err
    )
    assert "allowed: a data file or folder here, or a data set on the hub by name (org/name)" in result.err


def test_the_reference_config_validates_unchanged_with_local_data(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("TRINITY_TASKSET_PATH", str(gsm8k_folder(tmp_path)))
    for profile in ("ascend910b", "a100"):
        result = cli("config", "validate", "-c", REFERENCE, f"hardware={profile}")
        assert result.code == 0, result.err
        assert result.out.startswith(f"valid for {profile}")


def test_render_does_not_look_for_data(cli):
    result = cli("config", "render", "-c", REFERENCE, "hardware=a100", "--format", "json")
    assert result.code == 0 and result.json()["buffer"]["explorer_input"]["taskset"]["path"] == "openai/gsm8k"


def test_a_missing_local_path_says_where_relative_paths_are_read_from(cli, write, tmp_path):
    text = """\
        model:
          model_path: m
        algorithm:
          repeat_times: 2
        buffer:
          explorer_input:
            taskset: {name: t, path: ./nowhere}
            default_workflow_type: math_workflow
        """
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert (
        result.code == 2
        and "run.yaml:7:24: buffer.explorer_input.taskset.path: './nowhere' is not on this machine" in result.err
    )
    assert f"a relative one is read from the folder trinity runs in ({tmp_path})" in result.err


def test_sft_data_of_a_stage_is_checked_where_the_stage_wrote_it(cli, write):
    text = """\
        model:
          model_path: m
        stages:
          - stage_name: warmup
            mode: train
            algorithm: {algorithm_type: sft}
            buffer:
              trainer_input:
                experience_buffer: {name: sft, storage_type: file, path: ./sft-data}
        """
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert (
        result.code == 2
        and "run.yaml:9:60: buffer.trainer_input.experience_buffer.path: './sft-data' is not on this machine (in "
        "stage 'warmup')"
        in result.err
    )
