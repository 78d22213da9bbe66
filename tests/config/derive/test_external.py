"""Trinity-RFT's external (API) model keys (`model.external_model`, `explorer.rollout_model.external_model_config`) at
`trinity config validate` / `render`: mode bench only, a model name, the rollout model's copy derived, and what cannot
work refused where it is written (trinity/config/derive/external.py)."""

import json

import pytest
import yaml

BENCH = """\
mode: bench
model:
  model_path: qwen3-max
  max_model_len: 4096
  external_model:
    enable: true
    model_name: qwen3-max
buffer:
  batch_size: 2
  explorer_input:
    eval_tasksets:
      - name: gsm8k_eval
        path: ./data
        split: test
        format: {prompt_key: question, response_key: answer}
    default_eval_workflow_type: math_workflow
"""


@pytest.fixture(autouse=True)
def data(write):
    """The eval taskset's rows, in the test's folder (the working directory of `cli`)."""
    write("data/test.jsonl", json.dumps({"question": "What is 1+1?", "answer": "#### 2"}) + "\n")


def test_an_external_model_validates_in_bench_mode_with_its_rollout_copy_derived(cli, write):
    path = write("run.yaml", BENCH)
    assert cli("config", "validate", "-c", path, "hardware=cpu").code == 0
    result = cli("config", "render", "-c", path, "hardware=cpu")
    assert result.code == 0, result.err
    config = yaml.safe_load(result.out)
    copy = config["explorer"]["rollout_model"]["external_model_config"]
    assert copy == {
        "enable": True,
        "base_url_env": "OPENAI_BASE_URL",
        "api_key_env": "OPENAI_API_KEY",
        "model_name": "qwen3-max",
    }
    assert config["cluster"]["rollout_gpu_num"] == 0  # no engines start: the API answers
    explained = cli(
        "config", "render", "-c", path, "hardware=cpu", "--explain", "explorer.rollout_model.external_model_config"
    )
    assert "rule external_model" in explained.out, explained.out


def test_upstreams_defaults_validate_untouched(cli, write):
    text = BENCH.replace("  external_model:\n    enable: true\n    model_name: qwen3-max\n", "")
    result = cli("config", "render", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 0, result.err
    config = yaml.safe_load(result.out)
    assert config["model"]["external_model"] == {
        "enable": False,
        "base_url_env": "OPENAI_BASE_URL",
        "api_key_env": "OPENAI_API_KEY",
        "model_name": None,
    }


def test_an_external_model_outside_bench_is_refused_where_it_is_enabled(cli, write):
    result = cli(
        "config", "validate", "-c", write("run.yaml", BENCH.replace("mode: bench", "mode: explore")), "hardware=cpu"
    )
    assert result.code == 2
    assert (
        "error: run.yaml:6:5: model.external_model.enable: an external (API) model runs only in mode bench "
        "(Trinity-RFT's rule), not in mode 'explore': it cannot receive the trainer's weights" in result.err
    )
    assert "hint: set mode: bench to evaluate the API's model on the eval tasksets" in result.err


def test_training_with_an_external_model_is_refused(cli, write):
    result = cli("config", "validate", "-c", write("run.yaml", BENCH.replace("mode: bench\n", "")), "hardware=cpu")
    assert result.code == 2
    assert "model.external_model.enable: an external (API) model runs only in mode bench" in result.err
    assert "not in mode 'both'" in result.err or "not in mode 'colocate'" in result.err


def test_an_external_model_needs_its_name(cli, write):
    text = BENCH.replace("    model_name: qwen3-max\n", "")
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert "model.external_model.model_name: the external model's name is required" in result.err
    assert "hint: set model.external_model.model_name, e.g. qwen3-max" in result.err


def test_a_variable_name_that_is_no_name_is_refused_at_its_line(cli, write):
    text = BENCH.replace("    model_name: qwen3-max\n", "    model_name: qwen3-max\n    api_key_env: my-key\n")
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert "run.yaml:8:5: model.external_model.api_key_env: string should match pattern" in result.err
    assert "hint: environment variable names are letters, digits and _" in result.err


def test_the_rollout_copy_alone_or_differing_is_refused(cli, write):
    alone = BENCH.replace("  external_model:\n    enable: true\n    model_name: qwen3-max\n", "") + (
        "explorer:\n  rollout_model:\n    external_model_config: {enable: true, model_name: gpt}\n"
    )
    result = cli("config", "validate", "-c", write("run.yaml", alone), "hardware=cpu")
    assert result.code == 2
    assert (
        "model.external_model is not: Trinity-RFT copies model.external_model over this section, so the run would "
        "start its engines" in result.err
    )
    assert "explorer.rollout_model.external_model_config.enable" in result.err
    differing = BENCH + "explorer:\n  rollout_model:\n    external_model_config: {model_name: gpt-4o}\n"
    result = cli("config", "validate", "-c", write("run.yaml", differing), "hardware=cpu")
    assert result.code == 2
    assert (
        "explorer.rollout_model.external_model_config.model_name: 'gpt-4o' differs from "
        "model.external_model.model_name='qwen3-max', which Trinity-RFT copies over it" in result.err
    )
    same = BENCH + "explorer:\n  rollout_model:\n    external_model_config: {enable: true, model_name: qwen3-max}\n"
    assert cli("config", "validate", "-c", write("run.yaml", same), "hardware=cpu").code == 0


def test_a_workflow_that_needs_token_ids_is_refused_on_an_external_model(cli, write):
    text = BENCH.replace(
        "default_eval_workflow_type: math_workflow", "default_eval_workflow_type: arith_feedback_workflow"
    )
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert (
        "buffer.explorer_input.eval_tasksets[0].default_workflow_type: workflow 'arith_feedback_workflow' needs the "
        "engines' token ids" in result.err
    )
    for fine in ("math_boxed_workflow", "arith_workflow"):
        text = BENCH.replace("default_eval_workflow_type: math_workflow", f"default_eval_workflow_type: {fine}")
        assert cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu").code == 0, fine


def test_an_adapter_on_an_external_model_is_refused(cli, write):
    text = BENCH.replace("  max_model_len: 4096\n", "  max_model_len: 4096\n  lora_configs: [{lora_rank: 8}]\n")
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert "model.lora_configs: an external (API) model takes no adapter" in result.err


def test_upstreams_internal_engine_type_external_names_the_key_to_set(cli, write):
    result = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", BENCH),
        "hardware=cpu",
        "explorer.rollout_model.engine_type=external",
    )
    assert result.code == 2
    assert "explorer.rollout_model.engine_type: known Trinity-RFT value, not supported by trinity yet: 'external'" in (
        result.err
    )
    assert "hint: Trinity-RFT's validator writes it itself where model.external_model.enable is true" in result.err


def test_replies_without_a_token_budget_are_refused(cli, write):
    text = BENCH.replace("  max_model_len: 4096\n", "")
    result = cli("config", "validate", "-c", write("run.yaml", text), "hardware=cpu")
    assert result.code == 2
    assert (
        "error: run.yaml:5:5: model.external_model.enable: the external model's replies have no token budget (no "
        "model.max_response_tokens, and buffer.explorer_input.eval_tasksets.0 sets no rollout_args.max_tokens)"
        in result.err
    )
    assert "hint: set model.max_response_tokens (or model.max_model_len" in result.err
    given = cli(
        "config",
        "validate",
        "-c",
        write("run.yaml", text),
        "hardware=cpu",
        "+buffer.explorer_input.eval_tasksets.0.rollout_args.max_tokens=256",
    )
    assert given.code == 0, given.err
