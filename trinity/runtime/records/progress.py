"""Progress of a long run: a live bar per stage on a terminal, plain lines otherwise, and a summary."""

import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

PLAIN_EVERY_S = 10.0  # without a terminal: a line at most this often (and at the end of each stage)


class Progress:
    """step/total, reward, tokens/s and sync time of the running stage."""

    def __init__(self, stage: str, total: int, quiet: bool = False, stream: TextIO | None = None):
        self.stage, self.total, self.quiet = stage, total, quiet
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.fields: dict[str, str] = {}
        self.step = 0
        self.started = self.last_line = time.monotonic()

    def update(self, step: int, **values: float | None) -> None:
        """Record the latest numbers and redraw (or print a line when it is time)."""
        self.step = max(self.step, step)
        self.fields.update({k: _fmt(v) for k, v in values.items() if v is not None})
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r" + self._line(bar=True) + "\033[K")
            self.stream.flush()
        elif time.monotonic() - self.last_line >= PLAIN_EVERY_S:
            self._print()

    def note(self, text: str) -> None:
        """A line of its own about the stage (why it ends), below the bar."""
        if not self.quiet:
            self.stream.write(("\r\033[K" if self.tty else "") + f"{self.stage}: {text}\n")
            self.stream.flush()

    def close(self) -> None:
        """End the stage's bar with a newline (or its final plain line)."""
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r" + self._line(bar=True) + "\033[K\n")
        else:
            self._print()
        self.stream.flush()

    def _print(self) -> None:
        self.stream.write(self._line(bar=False) + "\n")
        self.stream.flush()
        self.last_line = time.monotonic()

    def _line(self, bar: bool) -> str:
        done = self.step / self.total if self.total else 0.0
        drawn = f"[{'#' * int(done * 20):<20}] " if bar and self.total else ""
        extra = "  ".join(f"{k} {v}" for k, v in self.fields.items())
        seconds = time.monotonic() - self.started
        steps = f"{self.step}/{self.total}" if self.total else str(self.step)  # 0: not known yet (serve: until stopped)
        return f"{self.stage}: {drawn}step {steps}  {extra}  {seconds:.0f}s".rstrip()


def _fmt(value: float) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


@dataclass
class StageSummary:
    """What one stage did, for the closing table."""

    name: str
    mode: str
    steps: int = 0
    seconds: float = 0.0
    reward: float | None = None
    eval_first: dict[str, float] = field(default_factory=dict)
    eval_last: dict[str, float] = field(default_factory=dict)
    checkpoint: str = ""
    note: str = ""
    peak_rss_mb: dict[str, float] = field(default_factory=dict)  # each role's peak resident memory, and the driver's
    # each role's peak device memory (torch's allocator), where it has an accelerator in its own process
    peak_device_mb: dict[str, float] = field(default_factory=dict)
    # from the previous stage's end (or the run's launch) to this stage's first step: placement and setup
    setup_s: float | None = None
    kept: tuple[int, int] = (0, 0)  # actors kept running from the previous stage, of the stage's actors
    # each role brought back while it ran (an engine or explorer replaced, the stage resumed): role, cause, step
    restarts: list[dict] = field(default_factory=list)


def restart_line(stage: str, checkpoint: str | None, cause: str, attempt: int, most: int) -> str:
    """The line a stage's restart prints: from which checkpoint, after what, and how much of the budget it took."""
    start = f"checkpoint {checkpoint}" if checkpoint else "its start (no complete checkpoint yet)"
    return f"restarting stage {stage} from {start} after {cause} (restart {attempt} of {most})"


def summary_table(stages: list[StageSummary]) -> str:
    """One row per stage: steps, restarts, time, setup time and actors kept, peak memory summed over its role processes
    and the driver, last reward, eval accuracy at its start and end, last checkpoint."""
    head = [
        "STAGE",
        "MODE",
        "STEPS",
        "RESTARTS",
        "TIME",
        "SETUP",
        "KEPT",
        "MEMORY",
        "REWARD",
        "EVAL START -> END",
        "CHECKPOINT",
    ]
    rows = [head]
    for s in stages:
        evals = (
            "; ".join(f"{k} {s.eval_first.get(k, float('nan')):.3f} -> {v:.3f}" for k, v in s.eval_last.items()) or "-"
        )
        reward = f"{s.reward:.3f}" if s.reward is not None else "-"
        setup = f"{s.setup_s:.1f}s" if s.setup_s is not None else "-"
        kept = f"{s.kept[0]}/{s.kept[1]}" if s.setup_s is not None else "-"
        memory = f"{sum(s.peak_rss_mb.values()) / 1024:.2f}GiB" if s.peak_rss_mb else "-"
        rows.append(
            [
                s.name,
                s.mode,
                str(s.steps),
                str(len(s.restarts)),
                f"{s.seconds:.0f}s",
                setup,
                kept,
                memory,
                reward,
                evals,
                s.checkpoint or s.note or "-",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    table = "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows) + "\n"
    return table + "".join(_restarts(s) for s in stages)


def _restarts(stage: StageSummary) -> str:
    """A stage's restarts under the table: how many, and each role brought back, at which step, after what."""
    if not stage.restarts:
        return ""
    count = len(stage.restarts)
    each = "; ".join(f"{r['role']} at step {r['step']} after {r['cause']}" for r in stage.restarts)
    return f"{stage.name}: {count} restart{'s' if count > 1 else ''}: {each}\n"
