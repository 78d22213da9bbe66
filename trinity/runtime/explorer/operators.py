"""The experience operators (config/operators.py): each explore step's experiences pass through them, in order,
before they reach the buffer. Each takes the experiences and its arguments, and returns what it keeps and what it
counted (written on the explorer's metrics line), as Trinity-RFT's filters do (buffer/operators/filters/
reward_filter.py: MaskResponseTruncatedOperator, DAPODynamicSamplingFilter)."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...config.operators import OPERATORS
from ...config.schema import RunConfig
from ...utils.imports import import_path
from ..experience import Experience

Result = tuple[list[Experience], dict[str, float]]
Pipeline = list[tuple[Callable[[list[Experience], dict[str, Any]], Result], dict[str, Any]]]


def pipeline(config: RunConfig) -> Pipeline:
    """The run's operators, each as (its function, its arguments), in order."""
    return [
        (import_path(OPERATORS[op.name].runtime, f"experience operator {op.name!r}"), op.args)
        for op in config.data_processor.experience_pipeline.operators
    ]


def apply(operators: Pipeline, exps: list[Experience]) -> Result:
    """`exps` through every operator in turn, and what they counted."""
    counted: dict[str, float] = {}
    for operator, args in operators:
        exps, metrics = operator(exps, args)
        counted |= metrics
    return exps, counted


def mask_response_truncated(exps: list[Experience], args: dict[str, Any]) -> Result:
    """Rollouts whose response was cut train none of their tokens (DAPO's overlong filtering): their action mask is
    all 0, and no turn is left to reward apart."""
    cut = [e.truncated for e in exps]
    out = [replace(e, action_mask=[0] * len(e.response_ids), turn_rewards=None) if c else e for e, c in zip(exps, cut)]
    return out, {"masked_truncated_count": float(sum(cut))}


def dapo_dynamic_sampling(exps: list[Experience], args: dict[str, Any]) -> Result:
    """The rollouts of the tasks (groups) of which some but not all are right (DAPO's dynamic sampling): right where
    the metric `metric_key` (else the reward) is above `correct_threshold`; a task of one rollout is dropped."""
    groups: dict[str, list[Experience]] = {}
    for exp in exps:
        groups.setdefault(exp.group, []).append(exp)
    kept, dropped = [], {"dropped_all_correct": 0.0, "dropped_all_wrong": 0.0}
    for group in groups.values():
        right = sum(_score(e, args["metric_key"]) > args["correct_threshold"] for e in group)
        if len(group) > 1 and 0 < right < len(group):
            kept += group
        elif len(group) > 1:
            dropped["dropped_all_correct" if right else "dropped_all_wrong"] += len(group)
    return kept, {"filtered_count": float(len(exps) - len(kept)), **dropped}


def _score(exp: Experience, metric: str) -> float:
    return float(exp.metrics.get(metric, exp.reward))
