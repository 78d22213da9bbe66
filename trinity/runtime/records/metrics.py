"""metrics.jsonl and the optional monitors: one JSON object per line with step, role, time and stage.

Contract (other tools read it): explorer lines carry reward_mean, response_length_mean,
tokens_per_s, weight_version, and <name>_mean of each metric the workflows report; trainer lines
loss, grad_norm, lr (and logprob_diff when the old log-probs are recomputed, kl_penalty with a
KL penalty in the reward, verl's rollout_corr/* with algorithm.rollout_correction); synchronizer
lines method, seconds, weight_version; eval lines
taskset, accuracy; preview lines (trainer.enable_preview) table and rows (prompt, response, reward), also shown by
the monitor: a wandb table as Trinity-RFT logs it, a TensorBoard text summary (a Markdown table; Trinity-RFT's
TensorBoard monitor shows none); a failure line, where a role's failure ended the run, cause, cause_role, died, how and
then (driver/blame.py), and not_restarted where the run was not restarted past it; a restart line, where a failed role
was brought back: cause_role, cause, attempt (k of max_restarts) and max_restarts, and where a trainer rank or the
buffer failed and the stage restarted (driver/stage_restart.py) from_checkpoint (None: the stage's start), where a
rollout engine or the explorer was replaced in place (driver/replace.py) seconds and, for an engine, sync; the cause
also a text event in the monitor.
Each line is one append (the rest of a short write follows at once); a reader that polls the file while the run
writes it may find the last line unfinished: a line without its newline is one still being written.
"""

import json
import os
import time
from pathlib import Path
from typing import Any

from .events import EventFile

PACKAGES = {"wandb": "wandb"}  # monitor_type -> the package its sink imports (preflight finds it before Ray starts)


class MetricsLog:
    """Appends metric lines; mirrors numbers to TensorBoard or wandb when the monitor asks (preflight has found
    wandb installed)."""

    def __init__(self, path: Path, monitor: Any = None, run_name: str = "", tensorboard_dir: Path | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.sinks = _sinks(monitor, run_name, tensorboard_dir)

    def write(self, role: str, step: int, stage: str | None, **values: Any) -> dict:
        """Append one line; returns the record."""
        record = {"step": step, "role": role, "time": time.time(), "stage": stage, **values}
        self._append(record)
        for sink in self.sinks:
            sink(role, step, values)
        return record

    def event(self, role: str, step: int, stage: str | None, text: str, **values: Any) -> dict:
        """Append one line of something that happened to the run (a restart), and show `text` in the monitor beside
        its numbers; returns the record."""
        record = self.write(role, step, stage, **values)
        for sink in self.sinks:
            sink.text(role, step, text)
        return record

    def table(self, name: str, step: int, stage: str | None, rows: list[dict]) -> dict:
        """Append a table of `rows` (each a dict of the same columns) as a preview line, and show it in the monitor;
        returns the record."""
        record = {"step": step, "role": "preview", "time": time.time(), "stage": stage, "table": name, "rows": rows}
        self._append(record)
        for sink in self.sinks:
            sink.table(name, step, rows)
        return record

    def _append(self, record: dict) -> None:
        line = (json.dumps(record, default=float) + "\n").encode()
        while line:  # a write may take less than all of it (a signal, a full disk short of failing)
            line = line[os.write(self.fd, line) :]

    def close(self) -> None:
        """Close the file and the monitors."""
        os.close(self.fd)
        for sink in self.sinks:
            getattr(sink, "close", lambda: None)()


def _sinks(monitor: Any, run_name: str, tensorboard_dir: Path | None) -> list:
    kind = getattr(monitor, "monitor_type", None)
    if kind == "tensorboard" and tensorboard_dir is not None:
        return [_TensorBoard(EventFile(tensorboard_dir))]
    if kind == "wandb":
        import wandb

        return [_Wandb(wandb.init(name=run_name, **monitor.monitor_args))]
    return []


class _TensorBoard:
    """Scalars as TensorBoard events (event_file.py: neither torch's SummaryWriter nor tensorboard in the driver)."""

    def __init__(self, writer: EventFile):
        self.writer = writer

    def __call__(self, role: str, step: int, values: dict) -> None:
        prefix = f"{role}/{values['taskset']}" if "taskset" in values else role
        scalars = {
            f"{prefix}/{key}": float(value)
            for key, value in values.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }
        if scalars:
            self.writer.add_scalars(step, scalars)

    def text(self, tag: str, step: int, text: str) -> None:
        self.writer.add_text(step, tag, text)

    def table(self, name: str, step: int, rows: list[dict]) -> None:
        """The rows as a Markdown table in a text summary (TensorBoard shows no tables)."""
        self.writer.add_text(step, name, markdown_table(rows))

    def close(self) -> None:
        self.writer.close()


class _Wandb:
    def __init__(self, run: Any):
        self.run = run

    def __call__(self, role: str, step: int, values: dict) -> None:
        prefix = f"{role}/{values['taskset']}" if "taskset" in values else role
        self.run.log(
            {f"{prefix}/{k}": v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
            step=step,
        )

    def text(self, tag: str, step: int, text: str) -> None:
        self.run.log({tag: text}, step=step)

    def table(self, name: str, step: int, rows: list[dict]) -> None:
        """The rows as a wandb table, as Trinity-RFT's WandbMonitor.log_table logs them."""
        import wandb

        columns = list(rows[0]) if rows else []
        self.run.log({name: wandb.Table(columns=columns, data=[[r.get(c) for c in columns] for r in rows])}, step=step)

    def close(self) -> None:
        self.run.finish()


def markdown_table(rows: list[dict]) -> str:
    """Rows of the same columns as a Markdown table; a cell's pipes and line breaks are escaped."""
    columns = list(rows[0]) if rows else []

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", "<br>")

    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows])
