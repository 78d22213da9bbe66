"""What each taskset's workflow needs: its workflow_args as its model takes them (workflow_args.py), a reward function
named among them known with its own arguments, and the packages it imports found here (workflows.NEEDS).

`trinity config validate` reports these (a missing package as a warning: the explorer may run elsewhere) and `trinity
run` refuses them before Ray starts; each error at the file, line and column of the value. Packages are found, never
imported: a config command imports no workflow's package.
"""

import importlib.util
from dataclasses import replace
from typing import Any

from ..errors import ConfigError, Issue, dotted
from . import modes
from .provenance import WRITTEN
from .resolve import ResolvedConfig
from .rewards import REWARDS, UNSUPPORTED_REWARDS, reward_path
from .validate import validate
from .workflow_args import ARGUMENTS, NESTED_REWARDS
from .workflows import NEEDS

INPUT = ("buffer", "explorer_input")


def workflow_issues(resolved: ResolvedConfig, missing: str = "error") -> list[Issue]:
    """Every problem with the tasksets' workflows, in every stage that explores; a missing package is of severity
    `missing`."""
    issues: list[Issue] = []
    for label, config, provenance in resolved.labelled():
        if not modes.mode(config.mode).explores:
            continue
        for key, taskset in _tasksets(config):
            found = _needs(key, taskset, provenance, label, missing) + _args(key, taskset, provenance)
            issues += [i for i in found if i not in issues]
    return issues


def _tasksets(config: Any) -> list[tuple[tuple, Any]]:
    explorer_input = config.buffer.explorer_input
    found = [((*INPUT, "taskset"), explorer_input.taskset)] if explorer_input.taskset else []
    found += [((*INPUT, "tasksets", i), t) for i, t in enumerate(explorer_input.tasksets)]
    return found + [((*INPUT, "eval_tasksets", i), t) for i, t in enumerate(explorer_input.eval_tasksets)]


def _needs(key: tuple, taskset: Any, provenance: Any, label: str, severity: str) -> list[Issue]:
    """The workflow's packages, found (never imported) by this Python."""
    name = taskset.default_workflow_type
    needs = NEEDS.get(name)
    lacking = [p for p in needs.packages if importlib.util.find_spec(p) is None] if needs else []
    if not lacking:
        return []
    where = _named_at(key, provenance)
    return [
        Issue(
            f"workflow {name!r} needs {', '.join(lacking)} ({needs.why}), which this Python cannot import{label}",
            key=dotted(where),
            source=provenance.written_where(where),
            hint=f"pip install 'trinity[{needs.extra}]' where the explorer runs",
            severity=severity,
        )
    ]


def _named_at(key: tuple, provenance: Any) -> tuple:
    """Where the taskset's workflow is named: its own key, else the input's default it took."""
    own = (*key, "default_workflow_type")
    defaults = ("default_eval_workflow_type",) * (key[2] == "eval_tasksets") + ("default_workflow_type",)
    written = [(*INPUT, name) for name in defaults if provenance.set_by((*INPUT, name), *WRITTEN)]
    return own if provenance.set_by(own, *WRITTEN) or not written else written[0]


def _args(key: tuple, taskset: Any, provenance: Any) -> list[Issue]:
    """The taskset's workflow_args against its workflow's model (not where rows may name other workflows)."""
    model = ARGUMENTS.get(taskset.default_workflow_type)
    if model is None or taskset.format.workflow_key:
        return []
    prefix = (*key, "workflow_args")
    try:
        args = validate(model, taskset.workflow_args, provenance.written_where, prefix=prefix)
    except ConfigError as exc:
        return _of_workflow(exc.issues, taskset.default_workflow_type)
    issues: list[Issue] = []
    for name_key, args_key in NESTED_REWARDS.items():
        name = getattr(args, name_key, None)
        if name is not None:
            issues += _reward(name, getattr(args, args_key), prefix, name_key, args_key, provenance)
    return _of_workflow(issues, taskset.default_workflow_type)


def _reward(name: str, args: dict, prefix: tuple, name_key: str, args_key: str, provenance: Any) -> list[Issue]:
    """A reward function named among workflow_args: known, runnable, and given arguments it takes."""
    where = (*prefix, name_key)
    allowed = ", ".join(REWARDS) + ", or module:function"
    if name in UNSUPPORTED_REWARDS:
        message = f"reward function {name!r} is not supported by trinity: {UNSUPPORTED_REWARDS[name]}"
        return [Issue(message, key=dotted(where), source=provenance.written_where(where), allowed=allowed)]
    if not reward_path(name):
        message = f"unknown reward function {name!r}"
        return [Issue(message, key=dotted(where), source=provenance.written_where(where), allowed=allowed)]
    if name not in REWARDS:
        return []  # your own: its arguments are checked when the explorer binds it
    try:
        validate(REWARDS[name].args, args, provenance.written_where, prefix=(*prefix, args_key))
    except ConfigError as exc:
        return [replace(i, message=f"{i.message} (reward function {name!r})") for i in exc.issues]
    return []


def _of_workflow(issues: list[Issue], name: str) -> list[Issue]:
    return [replace(i, message=f"{i.message} (workflow {name!r})") for i in issues]
