"""Workflows turn a task into scored experiences; `load` finds one by the name a taskset gives."""

from ...config.workflows import UNSUPPORTED_WORKFLOWS, WORKFLOWS, workflow_path
from ...utils.imports import import_path
from .base import Completion, ModelClient, Task, Workflow


def load(name: str) -> type[Workflow]:
    """The workflow class named `name` (built in, or `module:Class`)."""
    if name in UNSUPPORTED_WORKFLOWS:
        raise ValueError(
            f"workflow {name!r} is known to Trinity-RFT but not supported by trinity: {UNSUPPORTED_WORKFLOWS[name]}"
        )
    path = workflow_path(name)
    if not path:
        raise ValueError(
            f"unknown workflow {name!r}; built in: {', '.join(WORKFLOWS)}, or your own class as module:Class"
        )
    cls = import_path(path, f"workflow {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Workflow)):
        raise ValueError(f"workflow {name!r}: {path} is not a subclass of trinity.runtime.workflows.Workflow")
    return cls


__all__ = ["Completion", "ModelClient", "Task", "Workflow", "load"]
