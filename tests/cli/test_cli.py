"""The CLI as a separate process: exit codes, tracebacks, imports, side effects, `trinity run`."""

import json
import os
import subprocess
import sys

from tests.conftest import REFERENCE, run_process

HEAVY = ("torch", "ray", "vllm", "verl", "transformers", "torch_npu")


def test_python_dash_m_and_help(tmp_path):
    result = run_process("--help", cwd=tmp_path)
    assert result.code == 0 and "config" in result.out and "profile" in result.out and "run" in result.out


def test_config_error_exits_2_without_traceback(tmp_path):
    result = run_process("config", "validate", "--config", str(REFERENCE), "hardware=nope", cwd=tmp_path)
    assert result.code == 2
    assert "unknown hardware profile 'nope'" in result.err and "Traceback" not in result.err


def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path):
    # `trinity config render | head -1`, with the reader gone before the command writes its first line
    command = [sys.executable, "-m", "trinity", "config", "render", "--config", str(REFERENCE), "hardware=a100"]
    read, write = os.pipe()
    render = subprocess.Popen(command, cwd=tmp_path, stdout=write, stderr=subprocess.PIPE)
    os.close(write)
    os.close(read)
    err = render.stderr.read().decode()
    assert render.wait(timeout=60) == 141, err
    assert "internal error" not in err and "Traceback" not in err and "BrokenPipe" not in err, err


def test_debug_shows_the_traceback(tmp_path):
    result = run_process("config", "validate", "--config", str(REFERENCE), "hardware=nope", "--debug", cwd=tmp_path)
    assert result.code == 2 and "Traceback" in result.err and "unknown hardware profile 'nope'" in result.err


def test_config_commands_import_no_heavy_packages(tmp_path):
    probe = (
        "import sys; from trinity.cli.main import main; "
        f"main(['config', 'render', '--config', {str(REFERENCE)!r}, 'hardware=ascend910b', '-o', 'out.yaml']); "
        "main(['config', 'validate', 'hardware=a100']); main(['profile', 'list']); main(['profile', 'lint']); "
        "main(['profile', 'show', 'ascend910c']); main(['config', 'diff', 'hardware=a100', '--vs', "
        "'hardware=ascend910b']); "
        "main(['config', 'render', '--explain', 'trainer']); main(['config', 'schema']); "
        "main(['plan', 'memory', 'hardware=ascend910b4']); main(['plan', 'memory', 'hardware=h200', '--format', "
        "'json']); "
        f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_render_leaves_the_schema_emitter_and_other_commands_unimported(tmp_path):
    # the render path stays light (benchmarks/config_render.py times it): the JSON Schema emitter, hardware=auto's
    # detection-only parts and the other commands' implementations load only for the commands that use them
    probe = (
        "import sys; from trinity.cli.main import main; "
        f"main(['config', 'render', '--config', {str(REFERENCE)!r}, '+hardware=ascend910b', '-o', 'out.yaml']); "
        "print(sorted(m for m in ('trinity.config.json_schema', 'trinity.config.explain', 'trinity.config.diff', "
        "'trinity.config.memory', 'trinity.launch', 'trinity.runtime', 'trinity.cli.doctor', 'trinity.cli.run_cmd', "
        "'trinity.cli.plan_cmd', 'trinity.cli.profile_cmd', 'trinity.cli.doctor_cmd') if m in sys.modules)); "
        "main(['config', 'schema', '-o', 'schema.json']); print('trinity.config.json_schema' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-2:] == ["[]", "True"]


def test_help_imports_no_config_pipeline(tmp_path):
    probe = (
        "import sys; from trinity.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in sys.modules if m.startswith(('trinity.config.schema', 'trinity.config.resolve'))))"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_render_creates_no_files_or_folders(tmp_path, tmp_path_factory):
    # the data validate looks for lives elsewhere: the working folder stays empty
    data = tmp_path_factory.mktemp("gsm8k")
    for split in ("train", "test"):
        (data / f"{split}.jsonl").write_text('{"question": "1+1?", "answer": "#### 2"}\n')
    render = run_process("config", "render", "--config", str(REFERENCE), "hardware=ascend910b", cwd=tmp_path)
    validate = run_process(
        "config",
        "validate",
        "--config",
        str(REFERENCE),
        "hardware=ascend910b",
        cwd=tmp_path,
        env={"TRINITY_TASKSET_PATH": str(data)},
    )
    assert render.code == 0 and "sync_method: hccl" in render.out, render.err
    assert validate.code == 0 and validate.out == "valid for ascend910b (npu): 1 warning(s)\n", validate.err
    assert list(tmp_path.iterdir()) == []  # not even ./checkpoints


def test_render_json_through_a_real_process(tmp_path):
    result = run_process(
        "config", "render", "--config", str(REFERENCE), "+hardware=ascend910b", "--format", "json", cwd=tmp_path
    )
    cfg = json.loads(result.out)
    assert result.code == 0 and cfg["synchronizer"]["sync_method"] == "hccl" and cfg["trainer"]["device"] == "npu"


def test_run_checks_the_config_first(tmp_path):
    # The error does not depend on any cluster: it stops the run before Ray (no other Ray on the machine is joined).
    proc = run_process(
        "run", "--config", str(REFERENCE), "hardware=ascend910b", "trainer.use_torch_compile=true", cwd=tmp_path
    )
    assert (
        proc.code == 2
        and "torch.compile cannot be used for training on ascend910b" in proc.err
        and "Traceback" not in proc.err
    )
    assert "Ray" not in proc.err
