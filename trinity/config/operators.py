"""The experience operators `data_processor.experience_pipeline.operators` can name, as data.

The explorer applies them in order to each explore step's experiences before they reach the buffer, as Trinity-RFT's
ExperiencePipeline does in its explorer (buffer/pipelines/experience_pipeline.py; the operators are
buffer/operators/filters/reward_filter.py's and mappers/pass_rate_calculator.py's). Each entry gives its arguments
(upstream's names and defaults) and the runtime function (trinity/runtime/explorer/operators.py); upstream's other
operators are known and refused with the reason (`REFUSED`).
"""

from dataclasses import dataclass

from pydantic import Field

from .schema._base import Section

RUNTIME = "trinity.runtime.explorer.operators:"


class NoOperatorArgs(Section):
    """An operator that takes no arguments."""


class DynamicSamplingArgs(Section):
    metric_key: str = Field("accuracy", description="The metric that says a rollout is right; else its reward.")
    correct_threshold: float = Field(0.0, description="A rollout is right when that score is above this.")


@dataclass(frozen=True)
class OperatorEntry:
    """One experience operator: what it does, its arguments, and the function that applies it."""

    name: str
    does: str
    args: type[Section]
    runtime: str  # "module:function": (experiences, args) -> (experiences, metrics)


_ENTRIES = (
    OperatorEntry(
        "mask_response_truncated",
        "DAPO's overlong filtering: a rollout whose response was cut (at max_tokens or the context) trains none of "
        "its tokens",
        NoOperatorArgs,
        RUNTIME + "mask_response_truncated",
    ),
    OperatorEntry(
        "dapo_dynamic_sampling",
        "DAPO's dynamic sampling: a task's rollouts are kept only when some but not all are right (a task of one "
        "rollout is dropped)",
        DynamicSamplingArgs,
        RUNTIME + "dapo_dynamic_sampling",
    ),
    OperatorEntry(
        "pass_rate_calculator",
        "each task's pass rate (its rollouts' mean reward) fed back to the training tasksets' data selectors that "
        "learn from it (difficulty_based), and the share of tasks neither always nor never passed (selection/*)",
        NoOperatorArgs,
        RUNTIME + "pass_rate_calculator",
    ),
)
OPERATORS: dict[str, OperatorEntry] = {e.name: e for e in _ENTRIES}

_NOT_YET = "is not run by this version of trinity yet"
# upstream's other operators (buffer/operators/__init__.py) -> why they are refused
REFUSED = {
    "reward_filter": f"keeping rollouts whose reward is above a threshold {_NOT_YET}",
    "reward_std_filter": f"dropping tasks whose rewards agree {_NOT_YET}; algorithm.advantage_fn_args.std_threshold "
    "does it in the trainer",
    "invalid_reward_filter": f"dropping rollouts whose reward is not a number {_NOT_YET}",
    "reward_shaping_mapper": f"reshaping rewards by metrics {_NOT_YET}; shape them in the reward function",
    "data_juicer": "Data-Juicer pipelines (py-data-juicer and its service) are not in trinity yet",
}
