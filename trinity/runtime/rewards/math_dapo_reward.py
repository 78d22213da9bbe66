"""`math_dapo_reward` (DAPO, arXiv 2503.14476): answer accuracy, plus DAPO's soft penalty for overlong responses.

The answer is the last `\\boxed{}` after the last `</think>` (else all the text after it), compared with
the reference by normalised text or number (rewards/_answers.py). DAPO's reward is +1 right, -1 wrong: the
scores are `accuracy` (1 or 0, the evaluation metric) and `incorrect` (-1 when wrong). With
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
    """accuracy (1 or 0) and incorrect (-1 or 0): DAPO's +1 / -1 for the answer after the reasoning;
    format_score: the overlong penalty."""
    answer = response.split("</think>")[-1]
    boxed = last_boxed(answer)
    correct = equivalent(answer if boxed is None else boxed, str(truth))
    penalty = 0.0
    if enable_overlong_penalty:
        penalty = overlong_penalty(response_tokens, max_response_length, cache_length, penalty_factor)
    return {"accuracy": float(correct), "incorrect": float(correct) - 1.0, "format_score": penalty}
