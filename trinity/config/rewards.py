"""The reward functions a taskset can name: built-in names, or `module:function` for your own.

Names map to import paths and argument models as data, so the config layer checks a name and its
`reward_fn_args` without importing the runtime. The names are Trinity-RFT 0.6's (plus `exact_match`,
the demo's); upstream's that need a model or a package trinity does not install are known and refused
with the reason (`UNSUPPORTED_REWARDS`). Each function lives in its own module under
trinity/runtime/rewards/, which says how it scores.
"""

import math
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


RLCR_PARTS = ("format", "accuracy", "brier", "mean_confidence", "confidence_one_or_zero")


class RLCRRewardArgs(Section):
    weights: dict[str, float] | None = Field(
        None,
        description="Weight of each of the five parts, all named: format, accuracy, brier, mean_confidence, "
        "confidence_one_or_zero (None: 0.5, 0.5, 0.5, 1e-5, 1e-5).",
    )

    @field_validator("weights", mode="before")
    @classmethod
    def _all_five(cls, weights: object) -> object:
        # upstream's check: the five names exactly, each a finite number (not a bool)
        if not isinstance(weights, dict):
            return weights
        missing, unknown = sorted(set(RLCR_PARTS) - set(weights)), sorted(set(weights) - set(RLCR_PARTS))
        if missing or unknown:
            said = [f"missing {missing}"] * bool(missing) + [f"unknown {unknown}"] * bool(unknown)
            raise ValueError(f"weights names all five parts ({', '.join(RLCR_PARTS)}): {'; '.join(said)}")
        for name, value in weights.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"weight {name!r} must be a finite number (got {value!r})")
        return weights


class TrajectoryJudgeArgs(Section):
    model_name: str = Field("qwen3-max", min_length=1, description="The judge model, as its endpoint names it.")
    judge_api_base_url_env: str = Field(
        "OPENAI_BASE_URL", min_length=1, description="Environment variable holding the judge's OpenAI-compatible URL."
    )
    judge_api_key_env: str = Field(
        "OPENAI_API_KEY", min_length=1, description="Environment variable holding the judge's API key."
    )
    normalize_score: bool = Field(True, description="Map the grade from [score_min, score_max] to [0, 1], clipped.")
    score_min: float = Field(1.0, description="The judge's lowest grade.")
    score_max: float = Field(3.0, description="The judge's highest grade.")
    temperature: float = Field(0.0, ge=0, description="The judge's sampling temperature.")
    max_concurrency: int = Field(8, gt=0, description="Judge requests at once (upstream's GradingRunner).")
    reward_name: str = Field(
        "openjudge_trajectory_accuracy_reward", description="Upstream's label of this reward (logging only)."
    )
    timeout: float = Field(
        60.0,
        gt=0,
        description="Seconds a judge request may take before it counts as failed (trinity's).",
    )

    @model_validator(mode="after")
    def _a_range(self) -> "TrajectoryJudgeArgs":
        # upstream silently skips normalising such a range; here it is a config error
        if self.normalize_score and self.score_max <= self.score_min:
            raise ValueError(f"score_max ({self.score_max}) must be above score_min ({self.score_min})")
        return self


@dataclass(frozen=True)
class Reward:
    """A built-in reward function: where it is and the arguments it takes."""

    path: str  # module:function
    args: type[Section]
    # upstream's arguments this reward takes and reads nowhere -> why; one written gets a note (derive/buffer.py)
    unread: tuple[tuple[str, str], ...] = ()


REWARDS: dict[str, Reward] = {
    "exact_match": Reward(RUNTIME + "exact_match:exact_match", NoRewardArgs),
    "math_reward": Reward(RUNTIME + "math_reward:math_reward", MathRewardArgs),
    "accuracy_reward": Reward(RUNTIME + "accuracy_reward:accuracy_reward", NoRewardArgs),
    "format_reward": Reward(RUNTIME + "format_reward:format_reward", FormatRewardArgs),
    "countdown_reward": Reward(RUNTIME + "countdown_reward:countdown_reward", NoRewardArgs),
    "math_boxed_reward": Reward(RUNTIME + "math_boxed_reward:math_boxed_reward", MathBoxedRewardArgs),
    "math_dapo_reward": Reward(RUNTIME + "math_dapo_reward:math_dapo_reward", MathDAPORewardArgs),
    "rlcr_reward": Reward(RUNTIME + "rlcr_reward:rlcr_reward", RLCRRewardArgs),
    "trajectory_accuracy_grader_reward": Reward(
        RUNTIME + "trajectory_accuracy_grader_reward:trajectory_accuracy_grader_reward",
        TrajectoryJudgeArgs,
        unread=(
            ("max_concurrency", "each call grades one conversation, as upstream's runner does: nothing runs at once"),
            (
                "reward_name",
                "upstream's label of this reward in its logs; here the scores are reward and trajectory_score",
            ),
        ),
    ),
}

# Upstream's names trinity cannot run, with the reason.
UNSUPPORTED_REWARDS: dict[str, str] = {
    "rm_gallery_reward": "it scores with RM-Gallery's reward models (the rm_gallery package and a model download), "
    "which trinity does not install",
    "openjudge_multi_grader_reward": "it runs OpenJudge's default pair of graders (correctness and relevance) with "
    "their own prompts, which trinity does not have; trajectory_accuracy_grader_reward is the judge trinity runs",
}


def reward_path(name: str) -> str:
    """The import path of a reward name; '' when it is neither built in nor `module:function`."""
    if name in REWARDS:
        return REWARDS[name].path
    return name if IMPORT_PATH.match(name) else ""
