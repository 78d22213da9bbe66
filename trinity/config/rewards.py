"""The reward functions a taskset can name: built-in names, or `module:function` for your own.

Names map to import paths and argument models as data, so the config layer checks a name and its
`reward_fn_args` without importing the runtime. The names are Trinity-RFT 0.6's (plus `exact_match`,
the demo's); upstream's that need a model or a package trinity does not install are known and refused
with the reason (`UNSUPPORTED_REWARDS`). Each function lives in its own module under
trinity/runtime/rewards/, which says how it scores.
"""

import re
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from .schema._base import Section
from .workflows import IMPORT_PATH

RUNTIME = "trinity.runtime.rewards."
# upstream's format_reward pattern: reasoning in <think>, then the answer in <answer>, each on lines of their own
THINK_ANSWER = r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$"


class NoRewardArgs(Section):
    """A reward function that takes no arguments."""


class MathRewardArgs(Section):
    format_reward: float = Field(
        0.0, description="Added to the reward when the response marks its answer with '####' or \\boxed{}."
    )


class FormatRewardArgs(Section):
    pattern: str = Field(
        THINK_ANSWER, description="Regular expression the whole response must match (DOTALL, MULTILINE)."
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value


class MathBoxedRewardArgs(Section):
    with_think: bool = Field(False, description="Penalise a response without one <think>...</think> block.")
    format_score_coef: float = Field(0.1, ge=0, description="The penalty when with_think is on and the block is not.")


class MathDAPORewardArgs(Section):
    enable_overlong_penalty: bool | None = Field(None, description="Penalise responses that reach the length budget.")
    penalty_factor: float | None = Field(None, ge=0, description="Largest penalty (at max_response_length tokens).")
    max_response_length: int | None = Field(
        None, gt=0, description="Response tokens at which the full penalty applies."
    )
    cache_length: int | None = Field(
        None, gt=0, description="Tokens before max_response_length over which the penalty grows linearly from 0."
    )

    @model_validator(mode="after")
    def _complete_when_enabled(self) -> "MathDAPORewardArgs":
        # upstream asserts this on the first scored response; here it is a config error
        if not self.enable_overlong_penalty:
            return self
        missing = [f for f in ("penalty_factor", "max_response_length", "cache_length") if getattr(self, f) is None]
        if missing:
            raise ValueError(f"enable_overlong_penalty needs {', '.join(missing)}")
        if self.max_response_length <= self.cache_length:
            raise ValueError("max_response_length must be greater than cache_length")
        return self


@dataclass(frozen=True)
class Reward:
    """A built-in reward function: where it is and the arguments it takes."""

    path: str  # module:function
    args: type[Section]


REWARDS: dict[str, Reward] = {
    "exact_match": Reward(RUNTIME + "exact_match:exact_match", NoRewardArgs),
    "math_reward": Reward(RUNTIME + "math_reward:math_reward", MathRewardArgs),
    "accuracy_reward": Reward(RUNTIME + "accuracy_reward:accuracy_reward", NoRewardArgs),
    "format_reward": Reward(RUNTIME + "format_reward:format_reward", FormatRewardArgs),
    "countdown_reward": Reward(RUNTIME + "countdown_reward:countdown_reward", NoRewardArgs),
    "math_boxed_reward": Reward(RUNTIME + "math_boxed_reward:math_boxed_reward", MathBoxedRewardArgs),
    "math_dapo_reward": Reward(RUNTIME + "math_dapo_reward:math_dapo_reward", MathDAPORewardArgs),
}

_JUDGE = "it asks a judge model (OpenJudge) to grade the response, and trinity runs no judge models yet"
# Upstream's names trinity cannot run, with the reason.
UNSUPPORTED_REWARDS: dict[str, str] = {
    "rm_gallery_reward": "it scores with RM-Gallery's reward models (the rm_gallery package and a model download), "
    "which trinity does not install",
    "trajectory_accuracy_grader_reward": _JUDGE,
    "openjudge_multi_grader_reward": _JUDGE,
}


def reward_path(name: str) -> str:
    """The import path of a reward name; '' when it is neither built in nor `module:function`."""
    if name in REWARDS:
        return REWARDS[name].path
    return name if IMPORT_PATH.match(name) else ""
