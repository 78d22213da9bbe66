"""A task's rollouts as runs: split across runners (explorer.max_repeat_times_per_runner), numbered as Trinity-RFT
numbers them (explorer/scheduler.py: `_split_and_submit_tasks`; workflow_runner.py: eid.run = run_id_base + i)."""

from dataclasses import replace
from typing import TYPE_CHECKING

from ..experience import Experience

if TYPE_CHECKING:
    from ..workflows.base import Task


def split(task: "Task", most: int | None) -> list[tuple[int, "Task"]]:
    """(the number of its first run, the sub-task) for each part of `task`'s repeat_times rollouts, at most `most` in
    each (None: one part, the whole task), in run order."""
    size = most or task.repeat_times
    return [
        (base, replace(task, repeat_times=min(size, task.repeat_times - base)))
        for base in range(0, task.repeat_times, size)
    ]


def numbered(exps: list[Experience], base: int) -> list[Experience]:
    """A sub-task's experiences, each with the number of the run it comes from: base, base + 1, ... in the order its
    runs first appear; the experiences of one episode (an `episode` id) are one run, any other experience is a run of
    its own."""
    runs: dict[str, int] = {}
    out = []
    for i, exp in enumerate(exps):
        key = exp.episode or f"\0{i}"
        run = runs.setdefault(key, base + len(runs))
        out.append(replace(exp, run=run))
    return out
