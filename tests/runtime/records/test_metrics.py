"""metrics.jsonl and the TensorBoard monitor, read back as their readers read them (TensorBoard's events by
tensorboard's own loader)."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trinity.runtime.records.events import EventFile, crc32c
from trinity.runtime.records.metrics import MetricsLog

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    events = event_accumulator.EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_gets_every_number_under_its_role_and_taskset(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl", SimpleNamespace(monitor_type="tensorboard"), "run", tmp_path / "tb")
    log.write("trainer", 1, "grpo", loss=0.5, lr=1e-4, note="text", warm=True)
    log.write("trainer", 2, "grpo", loss=0.25, lr=2e-4)
    log.write("eval", 2, "grpo", taskset="heldout", accuracy=0.75)
    log.close()
    assert _scalars(tmp_path / "tb") == {
        "trainer/loss": [(1, 0.5), (2, 0.25)],
        "trainer/lr": [(1, pytest.approx(1e-4)), (2, pytest.approx(2e-4))],
        "eval/heldout/accuracy": [(2, 0.75)],
    }
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["role"], r["step"], r["stage"]) for r in lines] == [
        ("trainer", 1, "grpo"),
        ("trainer", 2, "grpo"),
        ("eval", 2, "grpo"),
    ]
    assert lines[0]["note"] == "text" and lines[0]["warm"] is True


def test_a_write_that_takes_part_of_a_line_is_carried_on_until_the_line_is_whole(tmp_path, monkeypatch):
    """os.write may take fewer bytes than asked (a signal, a nearly full disk): the rest follows, in order."""
    import os

    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, data[:7]))
    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.write("trainer", 1, "grpo", loss=0.5)
    log.table("preview", 1, "grpo", [{"prompt": "1+1", "response": "2", "reward": 1.0}])
    log.close()
    first, second = (json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines())
    assert first["loss"] == 0.5 and second["rows"] == [{"prompt": "1+1", "response": "2", "reward": 1.0}]


def test_without_a_monitor_only_the_jsonl_is_written(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl", SimpleNamespace(monitor_type="mlflow"), "run", tmp_path / "tb")
    log.write("trainer", 1, None, loss=0.5)
    log.close()
    assert not (tmp_path / "tb").exists()
    assert json.loads((tmp_path / "metrics.jsonl").read_text())["loss"] == 0.5


def test_the_tensorboard_monitor_imports_neither_torch_nor_tensorboard(tmp_path):
    code = (
        "import sys; from types import SimpleNamespace; from pathlib import Path; "
        "from trinity.runtime.records.metrics import MetricsLog; "
        f"log = MetricsLog(Path({str(tmp_path)!r}) / 'm.jsonl', SimpleNamespace(monitor_type='tensorboard'), 'r', "
        f"Path({str(tmp_path)!r}) / 'tb'); log.write('trainer', 1, None, loss=1.0); log.close(); "
        "print([m for m in ('torch', 'tensorboard') if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.strip()) == (0, "[]"), proc.stderr[-2000:]
    assert _scalars(tmp_path / "tb") == {"trainer/loss": [(1, 1.0)]}


def test_crc32c_is_castagnolis():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    assert crc32c(b"") == 0


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(
        st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=30),
        st.floats(width=32, allow_nan=False),
        min_size=1,
        max_size=5,
    ),
    st.integers(0, 2**62),
)
def test_tensorboards_loader_reads_every_scalar_and_step_written(tmp_path_factory, scalars, step):
    folder = tmp_path_factory.mktemp("tb")
    events = EventFile(folder)
    events.add_scalars(step, scalars)
    events.close()
    assert _scalars(folder) == {tag: [(step, value)] for tag, value in scalars.items()}


ROWS = [
    {"prompt": "1+1=", "response": "2", "reward": 0.0},
    {"prompt": "a | b", "response": "two\nlines", "reward": 1.0},
]


def test_a_preview_table_is_a_jsonl_line_and_a_tensorboard_text_summary(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl", SimpleNamespace(monitor_type="tensorboard"), "run", tmp_path / "tb")
    log.write("trainer", 2, "grpo", loss=0.5)
    log.table("rollout_examples", 2, "grpo", ROWS)
    log.close()
    line = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[1])
    assert (line["role"], line["step"], line["table"], line["rows"]) == ("preview", 2, "rollout_examples", ROWS)
    events = event_accumulator.EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0})
    events.Reload()
    assert events.Tags()["tensors"] == ["rollout_examples"] and events.Tags()["scalars"] == ["trainer/loss"]
    [shown] = events.Tensors("rollout_examples")
    assert shown.step == 2
    assert shown.tensor_proto.string_val[0].decode() == (
        "| prompt | response | reward |\n| --- | --- | --- |\n| 1+1= | 2 | 0.0 |\n| a \\| b | two<br>lines | 1.0 |"
    )
    metadata = events.SummaryMetadata("rollout_examples")
    assert metadata.plugin_data.plugin_name == "text"  # what TensorBoard's text dashboard shows


def test_a_preview_table_is_a_wandb_table(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monitor = SimpleNamespace(monitor_type="wandb", monitor_args={"mode": "offline", "dir": str(tmp_path)})
    log = MetricsLog(tmp_path / "metrics.jsonl", monitor, "run", None)
    log.table("rollout_examples", 3, None, ROWS)
    log.close()
    [saved] = tmp_path.glob("wandb/offline-run-*/files/media/table/rollout_examples_*.table.json")
    table = json.loads(saved.read_text())
    assert table["columns"] == ["prompt", "response", "reward"]
    assert table["data"] == [[r["prompt"], r["response"], r["reward"]] for r in ROWS]


def test_a_restart_is_a_jsonl_line_a_scalar_and_a_text_event_with_its_cause(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl", SimpleNamespace(monitor_type="tensorboard"), "run", tmp_path / "tb")
    cause = "trainer_node0.rank0 died: killed by SIGKILL"
    log.event("restart", 7, "grpo", cause, cause_role="trainer_node0.rank0", cause=cause, attempt=1)
    log.close()
    line = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert (line["role"], line["step"], line["cause"], line["attempt"]) == ("restart", 7, cause, 1)
    events = event_accumulator.EventAccumulator(str(tmp_path / "tb"), size_guidance={"tensors": 0})
    events.Reload()
    assert events.Tags()["scalars"] == ["restart/attempt"]
    [shown] = events.Tensors("restart")
    assert (shown.step, shown.tensor_proto.string_val[0].decode()) == (7, cause)
