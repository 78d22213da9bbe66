"""Rules of trinity/config/derive/pipeline.py: the experience operators a config names, through `trinity config
render/validate`, and the experience pipeline's saved input."""

import pytest

PIPELINE = "data_processor:\n  experience_pipeline:\n    operators:\n"


def test_the_dapo_examples_operators_run_with_upstreams_default_arguments(render):
    text = PIPELINE + "      - name: mask_response_truncated\n      - name: dapo_dynamic_sampling\n"
    result, cfg = render(text)
    assert result.code == 0 and result.err == ""
    assert cfg["data_processor"]["experience_pipeline"]["operators"] == [
        {"name": "mask_response_truncated", "args": {}},
        {"name": "dapo_dynamic_sampling", "args": {"metric_key": "accuracy", "correct_threshold": 0.0}},
    ]


def test_upstreams_other_operators_are_refused_by_name_with_the_reason(render):
    result, _ = render(PIPELINE + "      - name: data_juicer\n      - name: reward_filter\n")
    assert result.code == 2
    assert (
        "error: run.yaml:6:9: data_processor.experience_pipeline.operators[0].name: operator 'data_juicer' is known to "
        "Trinity-RFT but not run by trinity: Data-Juicer pipelines (py-data-juicer and its service) are not in trinity "
        "yet" in result.err
    )
    assert "operators[1].name: operator 'reward_filter' is known to Trinity-RFT but not run by trinity" in result.err
    assert "allowed: mask_response_truncated, dapo_dynamic_sampling" in result.err


def test_an_unknown_operator_gets_a_did_you_mean(render):
    result, _ = render(PIPELINE + "      - name: dapo_dynamic_sampler\n")
    assert result.code == 2 and "unknown experience operator 'dapo_dynamic_sampler'" in result.err
    assert "did you mean 'dapo_dynamic_sampling'?" in result.err


def test_an_operators_arguments_are_checked_where_they_are_written(render):
    text = PIPELINE + "      - name: dapo_dynamic_sampling\n        args: {correct_threshold: high, metrik_key: x}\n"
    result, _ = render(text)
    assert result.code == 2
    assert "run.yaml:7:16: data_processor.experience_pipeline.operators[0].args.correct_threshold: " in result.err
    assert "args.metrik_key: unknown key (operator 'dapo_dynamic_sampling')" in result.err
    result, _ = render(PIPELINE + "      - {name: mask_response_truncated, args: {x: 1}}\n")
    assert result.code == 2 and "operators[0].args.x: unknown key (operator 'mask_response_truncated')" in result.err


def test_a_mode_without_an_explorer_applies_no_operator_and_says_so(render):
    result, _ = render(PIPELINE + "      - name: mask_response_truncated\nmode: train\n", "hardware=cpu")
    assert "note: " in result.err and "the experience pipeline runs in the explorer, and mode 'train'" in result.err
    # bench has an explorer, but it evaluates checkpoints and runs no explore step
    result, _ = render(PIPELINE + "      - name: mask_response_truncated\nmode: bench\n", "hardware=cpu")
    assert "mode 'bench' runs no explore step: no operator is applied" in result.err
    result, _ = render(PIPELINE + "      - name: mask_response_truncated\nmode: explore\n", "hardware=cpu")
    assert result.code == 0 and "no operator is applied" not in result.err


SAVE = "data_processor.experience_pipeline"


@pytest.mark.parametrize(
    "written,path",
    [
        ("{save_input: true}", "sqlite:///explorer_output.db"),  # upstream's default place, in the run directory
        ("{save_input: true, input_save_path: kept/in.jsonl}", "kept/in.jsonl"),
        ("{save_input: true, input_save_path: 'sqlite:////data/in.db'}", "sqlite:////data/in.db"),
    ],
)
def test_save_input_keeps_a_steps_experiences_where_it_says(render, written, path):
    result, cfg = render(f"data_processor:\n  experience_pipeline: {written}\n", "hardware=cpu")
    assert result.code == 0 and cfg["data_processor"]["experience_pipeline"]["input_save_path"] == path


def test_save_input_takes_a_json_lines_file_or_sqlite_only(render):
    result, _ = render("data_processor:\n  experience_pipeline: {save_input: true, input_save_path: in.csv}\n")
    assert result.code == 2 and (
        f"run.yaml:4:43: {SAVE}.input_save_path: 'in.csv' is neither a JSON-lines file nor a SQLite database"
        in result.err
    )
    assert "allowed: a path ending in .jsonl or .json; sqlite:///PATH" in result.err


@pytest.mark.parametrize(
    "written,overrides,note",
    [
        ("{save_input: true}", ("mode=train",), "save_input: changes nothing: mode 'train' runs no explore step"),
        ("{input_save_path: in.jsonl}", (), "input_save_path: changes nothing: " + SAVE + ".save_input is false"),
    ],
)
def test_save_input_where_it_changes_nothing_is_noted(render, written, overrides, note):
    result, _ = render(f"data_processor:\n  experience_pipeline: {written}\n", "hardware=cpu", *overrides)
    assert result.code == 0 and f"{SAVE}.{note}" in result.err
