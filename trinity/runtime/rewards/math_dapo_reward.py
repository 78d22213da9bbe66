"""`math_dapo_reward` (DAPO, arXiv 2503.14476): answer accuracy, plus DAPO's soft penalty for overlong responses.

The answer is the last `\\boxed{}` after the last `</think>` (else all the text after it), compared with
the reference by normalised text or number (rewards/_answers.py); accuracy 1 or 0. With
`enable_overlong_penalty`, a response of L tokens gets format_score 0 while L <= max - cache,
-(L - (max - cache)) / cache * penalty_factor up to max, and -penalty_factor beyond
(max = max_response_length, cache = cache_length).
"""

from typing import Any

from ._answers import equivalent, last_boxed


def overlong_penalty(tokens: int, max_response_length: int, cache_length: int, penalty_factor: float) -> float:
    """DAPO's soft overlong punishment of a response of `tokens` tokens (0 or negative)."""
    free = max_response_length - cache_length
    if tokens <= free:
        return 0.0
    if tokens > max_response_length:
        return -penalty_factor
    return -(tokens - free) / cache_length * penalty_factor


def math_dapo_reward(
    response: str,
    truth: Any,
    response_tokens: int,
    enable_overlong_penalty: bool | None = None,
    penalty_factor: float | None = None,
    max_response_length: int | None = None,
    cache_length: int | None = None,
) -> dict[str, float]:
    """accuracy: the answer after the reasoning matches the reference; format_score: the overlong penalty."""
    answer = response.split("</think>")[-1]
    boxed = last_boxed(answer)
    correct = equivalent(answer if boxed is None else boxed, str(truth))
    penalty = 0.0
    if enable_overlong_penalty:
        penalty = overlong_penalty(response_tokens, max_response_length, cache_length, penalty_factor)
    return {"accuracy": float(correct), "format_score": penalty}
