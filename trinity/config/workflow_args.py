"""The `workflow_args` of built-in workflows that declare a model of them here, by workflow name.

`trinity config validate` and `trinity run`'s checks before Ray validate a taskset's workflow_args against its
workflow's model (workflow_checks.py), each error at the file, line and column of the argument; the workflow reads
them through the same model when its taskset loads. Names and defaults are Trinity-RFT's.
"""

from typing import Any

from pydantic import Field, field_validator

from .schema._base import Section


class MathBoxedArgs(Section):
    use_base: bool = Field(
        False, description="Prompt a base model with 'System:/User:/Assistant:' text instead of the chat template."
    )
    with_think: bool = Field(
        False,
        description="Ask for reasoning in <think></think> (the default system prompt says so) and have "
        "math_boxed_reward penalise a response without it.",
    )
    format_score_coef: float = Field(0.1, ge=0, description="math_boxed_reward's penalty when with_think is on.")


LAKE_CELLS = "SFHG"  # start, frozen, hole, goal: gymnasium's FrozenLake map letters


class FrozenLakeArgs(Section):
    env_max_steps: int = Field(
        8, gt=0, description="A generated lake has a path from start to goal of at most this many moves."
    )
    agent_max_steps: int = Field(10, gt=0, description="Model turns an episode may take.")
    desc: list[str] | None = Field(
        None,
        description="A fixed lake, one string per row of S (start), F (frozen), H (hole) and G (goal); None: each "
        "row's size, p and seed generate one.",
    )
    is_slippery: bool = Field(False, description="Moves may slide sideways (gymnasium's is_slippery).")
    reward_fn_type: str | None = Field(
        None,
        description="A reward function that scores the whole conversation instead of the lake's reward (its "
        "'reward' score; the lake's reward when it fails), e.g. trajectory_accuracy_grader_reward.",
    )
    reward_fn_args: dict[str, Any] = Field(default_factory=dict, description="That reward function's arguments.")

    @field_validator("desc")
    @classmethod
    def _a_lake(cls, rows: list[str] | None) -> list[str] | None:
        if rows is None:
            return rows
        if not rows or len({len(r) for r in rows}) != 1 or not rows[0]:
            raise ValueError("a lake is rows of one length, at least one")
        cells = "".join(rows)
        odd = sorted(set(cells) - set(LAKE_CELLS))
        if odd:
            raise ValueError(f"a lake's cells are S, F, H and G; found {', '.join(map(repr, odd))}")
        if cells.count("S") != 1 or cells.count("G") != 1:
            raise ValueError("a lake has exactly one start (S) and one goal (G)")
        return rows


class AlfworldArgs(Section):
    max_env_steps: int = Field(30, gt=0, description="Model turns (game steps) an episode may take.")


ARGUMENTS: dict[str, type[Section]] = {
    "math_boxed_workflow": MathBoxedArgs,
    "async_math_boxed_workflow": MathBoxedArgs,
    "frozen_lake_workflow": FrozenLakeArgs,
    "step_wise_alfworld_workflow": AlfworldArgs,
}
# arguments that name a reward function, and the key of its own arguments beside them
NESTED_REWARDS = {"reward_fn_type": "reward_fn_args"}


def defaults(model: type[Section]) -> dict[str, Any]:
    """Each argument of `model` with its default, as a workflow's `arguments` declares them."""
    return {name: field.get_default(call_default_factory=True) for name, field in model.model_fields.items()}
