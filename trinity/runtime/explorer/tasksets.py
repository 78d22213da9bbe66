"""The explorer's tasksets: rows read from a taskset's path become tasks, each with its workflow class and its reward
function (a row's own, named in its format.workflow_key / reward_fn_key column, else the taskset's default), the
taskset's sampling, and the data selector that chooses which rows a step reads."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...config.schema import RunConfig
from ...config.schema.buffer import TasksetConfig
from ...config.workflows import OWN_PROMPTS

if TYPE_CHECKING:
    from ..data.selectors import Selector
    from ..rewards import BoundReward
    from ..rollout.samples import Sampling
    from ..workflows.base import Task


@dataclass
class TaskSet:
    """A loaded taskset: its tasks, each one's workflow class, and how its rollouts sample."""

    name: str
    workflows: dict  # task uid -> its workflow class
    tasks: "list[Task]"
    sampling: "Sampling"
    selector: "Selector"  # which rows each read takes (data_selector)


def load_taskset(config: RunConfig, storage: TasksetConfig, is_eval: bool) -> TaskSet:
    """Taskset `storage` as tasks, each row's workflow class and the sampling of its rollouts."""
    from ..data import selectors
    from ..data.prompts import check_columns
    from ..data.tasksets import load_rows
    from ..rollout.samples import Sampling
    from ..workflows import Task

    explorer_input = config.buffer.explorer_input
    rows = load_rows(storage.path, storage.split, storage.subset_name)
    if not rows:
        raise ValueError(f"taskset {storage.name}: {storage.path} (split {storage.split!r}) has no rows")
    check_columns(
        f"taskset {storage.name}", storage.format, rows[0], prompt=storage.default_workflow_type not in OWN_PROMPTS
    )
    kind = "eval" if is_eval else "train"
    rewards = row_rewards(storage, rows)
    tasks = [
        Task(
            f"{storage.name}/{kind}/{i}",
            row,
            storage.format,
            storage.repeat_times,
            storage.workflow_args,
            storage.reward_fn_args,
            is_eval,
            reward_fn,
        )
        for i, (row, reward_fn) in enumerate(zip(rows, rewards))
    ]
    args = storage.rollout_args
    max_tokens = args.max_tokens or config.model.max_response_tokens or 16
    sampling = Sampling(
        args.temperature,
        args.top_p,
        args.top_k,
        max_tokens,
        config.model.min_response_tokens,
        config.explorer.rollout_model.repetition_penalty,
        args.logprobs or 0,
    )
    workflows = row_workflows(storage, rows, storage.default_workflow_type or explorer_input.default_workflow_type)
    from ..workflows.base import check_args

    try:
        check_args(dict.fromkeys(workflows), storage.workflow_args)
    except ValueError as exc:
        raise ValueError(f"taskset {storage.name}: {exc}") from None
    try:
        selector = selectors.build(rows, storage.data_selector)
    except ValueError as exc:
        raise ValueError(f"taskset {storage.name}: data_selector: {exc}") from None
    return TaskSet(storage.name, {task.uid: cls for task, cls in zip(tasks, workflows)}, tasks, sampling, selector)


def row_workflows(storage: TasksetConfig, rows: list[dict], default: str | None) -> list[type]:
    """Each row's workflow class: the one its format.workflow_key column names, else the taskset's default."""
    from ..workflows import load

    classes: dict[str, type] = {}
    out = []
    for i, row in enumerate(rows):
        name = (row.get(storage.format.workflow_key) if storage.format.workflow_key else None) or default
        if name is None:
            raise ValueError(
                f"taskset {storage.name}: row {i} names no workflow in column {storage.format.workflow_key!r}, and "
                "the taskset has no default_workflow_type"
            )
        if not isinstance(name, str):
            raise ValueError(
                f"taskset {storage.name}: row {i}: column {storage.format.workflow_key!r} holds {name!r}, not a "
                "workflow name"
            )
        if name not in classes:
            try:
                classes[name] = load(name)
            except ValueError as exc:
                raise ValueError(f"taskset {storage.name}: row {i}: {exc}") from None
        out.append(classes[name])
    return out


def row_rewards(storage: TasksetConfig, rows: list[dict]) -> "list[BoundReward | None]":
    """Each row's reward function: the one its format.reward_fn_key column names, else the taskset's default (the
    input's was filled in by derive), each with the taskset's reward_fn_args; None leaves the workflow its own."""
    key, bound = storage.format.reward_fn_key, {}
    default = taskset_reward(storage, storage.default_reward_fn_type)
    out = []
    for i, row in enumerate(rows):
        name = row.get(key) if key else None
        if not name:
            out.append(default)
            continue
        if not isinstance(name, str):
            raise ValueError(f"taskset {storage.name}: row {i}: column {key!r} holds {name!r}, not a reward function")
        if name not in bound:
            try:
                bound[name] = taskset_reward(storage, name)
            except ValueError as exc:
                raise ValueError(f"{exc} (row {i}, column {key!r})") from None
        out.append(bound[name])
    return out


def taskset_reward(storage: TasksetConfig, name: str | None) -> "BoundReward | None":
    """The taskset's reward function with its reward_fn_args; None leaves each workflow its default."""
    from ..rewards import bind

    if name is None:
        return None
    try:
        return bind(name, storage.reward_fn_args)
    except ValueError as exc:
        raise ValueError(f"taskset {storage.name}: {exc}") from None
