"""What `trinity run` refuses before Ray starts: in seconds, exit 2, with the place to fix it, and no Ray."""

import os
import socket
import subprocess
import sys
import tempfile

import pytest

from tests.conftest import REFERENCE, REPO

DEMO = REPO / "examples" / "arith" / "arith.yaml"


@pytest.fixture
def run(tmp_path, demo_assets):
    def _run(*args, env=None):
        ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # empty afterwards: Ray never started
        full = {
            **{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
            "RAY_TMPDIR": ray_tmp,
            "TRINITY_DEMO_DIR": str(demo_assets),
            **(env or {}),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "trinity", "run", *args],
            cwd=tmp_path,
            env=full,
            capture_output=True,
            text=True,
            timeout=300,
        )
        started = os.listdir(ray_tmp)
        subprocess.run(["rm", "-rf", ray_tmp])
        return proc, started

    return _run


def test_hub_names_the_hub_cannot_give_end_the_run_before_ray(run, tmp_path):
    """Online, the hub out of reach (HF_ENDPOINT: a closed port, tests/conftest.py) and nothing cached: each key that
    names a hub repo is an error, in seconds, before Ray."""
    online = {"HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf")}
    proc, started = run(
        "-c", str(REFERENCE), "hardware=cpu", "explorer.rollout_model.tensor_parallel_size=1", env=online
    )
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("trinity: cannot fetch what the run names on the hub (3 problems)")
    assert (
        "gsm8k.yaml:26:7: buffer.explorer_input.taskset.path: could not reach http://127.0.0.1:1 to fetch "
        "'openai/gsm8k'" in proc.stderr
    )
    assert (
        "gsm8k.yaml:13:3: model.model_path: could not reach http://127.0.0.1:1 to fetch 'Qwen/Qwen2.5-1.5B-Instruct'"
        in proc.stderr
    )


def test_a_model_folder_that_is_not_here(run, local_gsm8k, tmp_path):
    proc, started = run(
        "-c",
        str(REFERENCE),
        "hardware=cpu",
        env={"TRINITY_TASKSET_PATH": str(local_gsm8k), "TRINITY_MODEL_PATH": "./m"},
    )
    assert proc.returncode == 2 and started == []
    assert "model.model_path: './m' is not a model folder (no config.json there)" in proc.stderr
    assert f"a relative one is read from the folder trinity runs in ({tmp_path})" in proc.stderr


SFT_RESPONSE = "stages.0.buffer.trainer_input.experience_buffer.format.response_key"
MISSING_COLUMNS = [  # (override, the key in the error, the data set)
    (f"{SFT_RESPONSE}=answer", SFT_RESPONSE.removeprefix("stages.0."), "data set arith_sft (in stage 'sft_warmup')"),
    (
        "buffer.explorer_input.taskset.format.prompt_key=question",
        "buffer.explorer_input.taskset.format.prompt_key",
        "taskset arith (in stage 'grpo')",
    ),
    (
        "buffer.explorer_input.eval_tasksets.0.format.system_prompt_key=system",
        "buffer.explorer_input.eval_tasksets[0].format.system_prompt_key",
        "taskset arith-heldout (in stage 'grpo')",
    ),
]


def test_a_format_column_the_data_sets_rows_lack(run):
    """Each data set's first row is read in the driver: a column its format names and the rows lack is refused
    before Ray, for every data set at once, naming the columns there are."""
    proc, started = run(*(override for override, _, _ in MISSING_COLUMNS))
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert "trinity: 3 problems in the config" in proc.stderr
    for override, key, what in MISSING_COLUMNS:
        column = override.split("=")[1]
        assert (
            f": {key}: {what}: rows have no column '{column}' (columns: prompt, response)\n"
            f"    hint: set {key} to the column that holds it\n"
        ) in proc.stderr
    assert f"error: override '{MISSING_COLUMNS[1][0]}': {MISSING_COLUMNS[1][1]}: " in proc.stderr  # where it was set


def test_a_taskset_split_without_a_file(run, demo_assets):
    proc, started = run("buffer.explorer_input.taskset.split=validation")
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert (
        "error: override 'buffer.explorer_input.taskset.split=validation': buffer.explorer_input.taskset.split: "
        f"taskset arith (in stage 'grpo'): {demo_assets}/data: no file for split 'validation' (validation.jsonl, "
        "validation-00000.parquet, a validation/ folder, ...): splits: train, test; data files here: test.jsonl, "
        "train.jsonl\n"
        "    allowed: .parquet, .jsonl, .json, .csv files with at least one row, or a folder saved by datasets\n"
        "    hint: check the path, its split and subset_name, and the file's contents\n"
    ) in proc.stderr


def test_the_columns_a_selector_or_a_rows_reward_names_are_checked_before_ray(run):
    """A taskset's data_selector.feature_keys and format.reward_fn_key name columns its rows must have."""
    selector = "{selector_type: difficulty_based, feature_keys: [prompt, pass_rate]}"
    proc, started = run(
        f"+stages.1.buffer.explorer_input.taskset.data_selector={selector}",
        "+buffer.explorer_input.eval_tasksets.0.format.reward_fn_key=scorer",
    )
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert "trinity: 2 problems in the config" in proc.stderr
    for key, what, column in [
        ("buffer.explorer_input.taskset.data_selector.feature_keys[1]", "taskset arith", "pass_rate"),
        ("buffer.explorer_input.eval_tasksets[0].format.reward_fn_key", "taskset arith-heldout", "scorer"),
    ]:
        assert f"{key}: {what} (in stage 'grpo'): rows have no column '{column}' (columns: prompt, response)\n" in (
            proc.stderr
        )


def test_the_rows_a_preference_or_mixing_trainer_reads_are_checked_for_their_columns(run, demo_assets):
    """DPO's data set needs chosen and rejected columns; the SFT data set a mixing strategy adds, a response."""
    expert = f"{{expert: {{name: expert, path: {demo_assets}/data, format: {{response_key: a}}}}}}"
    proc, started = run(
        "stages.0.algorithm.algorithm_type=dpo",
        "stages.1.algorithm.algorithm_type=mix",
        f"+stages.1.buffer.trainer_input.auxiliary_buffers={expert}",
        "+stages.1.algorithm.sample_strategy_args={sft_dataset_name: expert}",
    )
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert "trinity: 3 problems in the config" in proc.stderr
    dpo, mix = "data set arith_sft (in stage 'sft_warmup')", "data set expert (in stage 'grpo')"
    for key, what, column in [
        ("buffer.trainer_input.experience_buffer.format.chosen_key", dpo, "chosen"),
        ("buffer.trainer_input.experience_buffer.format.rejected_key", dpo, "rejected"),
        ("buffer.trainer_input.auxiliary_buffers.expert.format.response_key", mix, "a"),
    ]:
        assert f"{key}: {what}: rows have no column '{column}' (columns: prompt, response)\n" in proc.stderr


HIDE_VLLM = """import importlib.util
_find = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in ("vllm", "vllm_ascend") else _find(name, *a)
"""


def test_a_vllm_engine_where_vllm_is_not_installed(run, local_gsm8k, demo_assets, tmp_path):
    """The run's Python as if vLLM (or its CPU build, which CI installs) were absent: a sitecustomize hides it."""
    (tmp_path / "hide").mkdir()
    (tmp_path / "hide" / "sitecustomize.py").write_text(HIDE_VLLM)
    env = {
        "TRINITY_TASKSET_PATH": str(local_gsm8k),
        "TRINITY_MODEL_PATH": str(demo_assets / "model"),
        "PYTHONPATH": str(tmp_path / "hide"),
    }
    proc, started = run("-c", str(REFERENCE), "hardware=a100", env=env)
    assert proc.returncode == 2 and started == []
    assert (
        "explorer.rollout_model.engine_type: engine type 'vllm' on a100 needs vllm, which this Python cannot import"
        in proc.stderr
    )
    assert "pip install '.[gpu]'" in proc.stderr


def test_a_trainer_value_verl_would_refuse_is_ours_to_refuse_first(run):
    proc, started = run("trainer.trainer_strategy=megatron", "hardware=cpu")
    assert proc.returncode == 2 and started == [] and "'megatron' does not run on cpu" in proc.stderr


def test_a_model_defined_by_its_own_code_needs_trust(run, remote_code_model):
    proc, started = run("hardware=cpu", f"model.model_path={remote_code_model}")
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert (
        f"model.model_path: '{remote_code_model}' has a model defined by its own code "
        "(modeling_tiny.TinyForCausalLM), which runs only with model.trust_remote_code" in proc.stderr
    )
    assert (
        "hint: read the .py files in the model folder; if you trust them, set model.trust_remote_code: true"
        in proc.stderr
    )


@pytest.mark.parametrize("vocab", ["missing", 1, 10**6])
def test_a_teacher_that_is_not_here_or_speaks_another_vocabulary(run, demo_assets, tmp_path, vocab):
    """Distillation reads the teacher's log-probs at the student's token ids: a teacher folder without config.json,
    or with a vocabulary of another size (smaller or larger), stops the run before Ray."""
    import json

    teacher = tmp_path / "teacher"
    teacher.mkdir()
    if vocab != "missing":
        (teacher / "config.json").write_text(json.dumps({"vocab_size": vocab}))
    stage = "stages.1.algorithm.algorithm_type=jsd", f"+stages.1.model.teacher_model_path={teacher}"
    proc, started = run(*stage)
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    ours = json.loads((demo_assets / "model" / "config.json").read_text())["vocab_size"]
    want = (
        f"model.teacher_model_path: '{teacher}' is not a model folder (no config.json there)"
        if vocab == "missing"
        else f"model.teacher_model_path: the teacher's vocabulary ({vocab} tokens) is not the policy model's ({ours})"
    )
    assert want in proc.stderr


def test_a_ray_address_where_nothing_answers(run, tmp_path):
    """Ray retries such an address for minutes; the run is refused in seconds, naming where the address was set."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "run.yaml"
    config.write_text(DEMO.read_text().replace("  node_num: 1\n", f"  node_num: 1\n  ray_address: 127.0.0.1:{port}\n"))
    hint = (
        "    hint: write host:port or ray://host[:port]; check that the head node is up (`ray status --address "
        "ADDRESS`), or set cluster.ray_address=local to start a local Ray\n"
    )
    proc, started = run("-c", str(config))
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert "trinity: cannot reach the Ray cluster\nerror: run.yaml:24:3: cluster.ray_address: " in proc.stderr
    head, _, tail = proc.stderr.partition(" (which Ray joins at ")  # a loopback host: at this node's own address
    assert head.endswith(
        f"error: run.yaml:24:3: cluster.ray_address: cannot join the Ray cluster: nothing answers at 127.0.0.1:{port}"
    )
    assert tail.endswith(f":{port}) (Connection refused)\n" + hint)
    proc, started = run("--dry-run", env={"RAY_ADDRESS": f"ray://127.0.0.1:{port}"})
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert proc.stderr.endswith(
        "error: $RAY_ADDRESS: cluster.ray_address: cannot join the Ray cluster: nothing answers at "
        f"127.0.0.1:{port} (Connection refused)\n" + hint
    )


def test_an_npu_run_on_a_node_without_the_ascend_stack_ends_before_ray_with_the_commands(run):
    """The check `trinity doctor` makes of an NPU node runs before Ray on an NPU profile: here, no CANN at all."""
    proc, started = run("hardware=ascend910b")
    assert proc.returncode == 2 and started == [] and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("trinity: this node's software stack cannot run this profile\nerror: this node, ")
    assert "hardware: no CANN toolkit found here (its ascend_toolkit_install.info)" in proc.stderr
    assert "hint: install CANN 9.1.0 (toolkit, 910b ops, NNAL), then: source /usr/local/Ascend/" in proc.stderr
