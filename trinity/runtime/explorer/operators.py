"""The experience operators (config/operators.py): each explore step's experiences pass through them, in order,
before they reach the buffer. Each takes the experiences and its arguments, and returns what it keeps and what it
counted (written on the explorer's metrics line), as Trinity-RFT's filters do (buffer/operators/filters/
reward_filter.py: MaskResponseTruncatedOperator, DAPODynamicSamplingFilter; mappers/pass_rate_calculator.py:
PassRateCalculator)."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...config.operators import OPERATORS
from ...config.schema import RunConfig
from ...utils.imports import import_path
from ..buffer.sqlite_store import SqliteStore
from ..buffer.stores import SQLITE_PREFIX, JsonlFile, sqlite_path
from ..experience import Experience

# what pass_rate_calculator hands the explorer among its metrics: task (an experience's group) -> its pass rate,
# for the data selectors (as Trinity-RFT's SELECTOR_METRIC); the explorer takes it out before the metrics are written
PASS_RATES = "pass_rates"
Result = tuple[list[Experience], dict[str, Any]]
Pipeline = list[tuple[Callable[[list[Experience], dict[str, Any]], Result], dict[str, Any]]]


def pipeline(config: RunConfig) -> Pipeline:
    """The run's operators, each as (its function, its arguments), in order."""
    return [
        (import_path(OPERATORS[op.name].runtime, f"experience operator {op.name!r}"), op.args)
        for op in config.data_processor.experience_pipeline.operators
    ]


def input_store(config: RunConfig, run_dir: Path) -> JsonlFile | SqliteStore | None:
    """Where data_processor.experience_pipeline.save_input keeps each step's experiences before the operators (None:
    nowhere): a JSON-lines file or SQLite (derive/pipeline.py saved_input), relative paths in the run directory."""
    pipeline = config.data_processor.experience_pipeline
    if not pipeline.save_input or pipeline.input_save_path is None:
        return None
    if pipeline.input_save_path.startswith(SQLITE_PREFIX):
        return SqliteStore(sqlite_path(pipeline.input_save_path, run_dir))
    return JsonlFile(run_dir / pipeline.input_save_path)


def apply(operators: Pipeline, exps: list[Experience]) -> Result:
    """`exps` through every operator in turn, and what they counted."""
    counted: dict[str, Any] = {}
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


def pass_rate_calculator(exps: list[Experience], args: dict[str, Any]) -> Result:
    """Each task's pass rate, the mean reward of its rollouts here (PASS_RATES, for the data selectors), and the
    shares of tasks whose rate is inside (0, 1), inside (1/16, 15/16), below 1, above 0, below 15/16 and above 1/16
    (upstream's selection/* metrics); the experiences pass unchanged."""
    rewards: dict[str, list[float]] = {}
    for exp in exps:
        rewards.setdefault(exp.group, []).append(exp.reward)
    rates = {task: sum(r) / len(r) for task, r in rewards.items()}
    low, high = 1 / 16 + 1e-3, 15 / 16 - 1e-3

    def share(test: Callable[[float], bool]) -> float:
        return sum(map(test, rates.values())) / len(rates) if rates else 0.0

    return exps, {
        PASS_RATES: rates,
        "selection/valid_ratio": share(lambda r: 0 < r < 1),
        "selection/strict_valid_ratio": share(lambda r: low < r < high),
        "selection/<1_ratio": share(lambda r: r < 1),
        "selection/>0_ratio": share(lambda r: r > 0),
        "selection/<15_16_ratio": share(lambda r: r < high),
        "selection/>1_16_ratio": share(lambda r: r > low),
    }
