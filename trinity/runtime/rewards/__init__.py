"""Reward functions: a taskset names one (`default_reward_fn_type`), its workflow scores each response with it.

A reward function is a plain function

    def my_reward(response: str, truth, **reward_fn_args) -> dict[str, float]

`response` is the generated text, `truth` the row's `format.response_key` column as stored (a string,
or whatever the data set holds there), and `reward_fn_args` the taskset's, as keyword arguments. It
may also name any of `prompt` (the prompt text), `response_tokens` (the response's length in tokens),
`row` (the whole row) and `messages` (the conversation the response answers, OpenAI-style messages, where the
workflow has one) as parameters: those it names are passed, the others are not. It returns
named scores; the experience's reward is their sum, and a score named `accuracy` is also the
evaluation accuracy (else the reward is). The built-in ones are listed in trinity/config/rewards.py;
your own is `my_package.module:my_reward`.
"""

import inspect
from collections.abc import Callable
from numbers import Real
from typing import Any

from pydantic import ValidationError

from ...config.rewards import REWARDS, UNSUPPORTED_REWARDS, reward_path
from ...utils.imports import import_path

CONTEXT = (
    "prompt",
    "response_tokens",
    "row",
    "messages",
)  # what a reward function may ask for beyond response and truth


def load(name: str) -> Callable[..., Any]:
    """The reward function named `name` (built in, or `module:function`)."""
    if name in UNSUPPORTED_REWARDS:
        raise ValueError(f"reward function {name!r} is not supported by trinity: {UNSUPPORTED_REWARDS[name]}")
    path = reward_path(name)
    if not path:
        raise ValueError(
            f"unknown reward function {name!r}; built in: {', '.join(REWARDS)}, or your own function as module:function"
        )
    fn = import_path(path, f"reward function {name!r}")
    if isinstance(fn, type) or not callable(fn):
        raise ValueError(
            f"reward function {name!r}: {path} is not a function; give one taking (response, truth, **reward_fn_args) "
            "and returning a dict of scores"
        )
    return fn


class BoundReward:
    """A reward function with its taskset's reward_fn_args: called with one response and its reference."""

    def __init__(self, name: str, fn: Callable[..., Any], args: dict[str, Any]):
        self.name, self.fn, self.args = name, fn, args
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # a builtin without a signature: it gets no context
            params = {}
        self.context = frozenset(c for c in CONTEXT if c in params)

    def __call__(self, response: str, truth: Any, **context: Any) -> dict[str, float]:
        """The named scores of `response`; `context` holds prompt, response_tokens, row and messages, passed where
        asked."""
        asked = {k: v for k, v in context.items() if k in self.context}
        return _scores(self.name, self.fn(response, truth, **asked, **self.args))


def bind(name: str, args: dict[str, Any]) -> BoundReward:
    """The reward function `name` with `args`; a built-in's are checked and completed by its argument model."""
    fn = load(name)
    if name in REWARDS:
        try:
            args = REWARDS[name].args.model_validate(args).model_dump()
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'reward_fn_args'}: {e['msg']}" for e in exc.errors(include_url=False)
            )
            raise ValueError(f"reward function {name!r}: bad reward_fn_args: {problems}") from None
    else:  # your own: its reward_fn_args must be keywords it takes, or every rollout would fail
        try:
            inspect.signature(fn).bind_partial("response", "truth", **args)
        except TypeError as exc:
            raise ValueError(f"reward function {name!r}: reward_fn_args {sorted(args)} do not fit it: {exc}") from None
        except ValueError:  # a builtin without a signature: checked when it is called
            pass
    return BoundReward(name, fn, dict(args))


def _scores(name: str, scores: Any) -> dict[str, float]:
    """A reward function's result as named float scores; a plain number counts as {'reward': number}."""
    if isinstance(scores, Real):
        return {"reward": float(scores)}
    if not isinstance(scores, dict) or not all(isinstance(k, str) and isinstance(v, Real) for k, v in scores.items()):
        raise TypeError(f"reward function {name!r} returned {scores!r}, not a dict of named numbers")
    return {k: float(v) for k, v in scores.items()}


__all__ = ["BoundReward", "bind", "load"]
