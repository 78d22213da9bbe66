"""`math_boxed_reward` (MATH-style): the response's last `\\boxed{}` against the reference. accuracy 1 or 0.

The reference's answer is its last `\\boxed{}`, else the whole reference; a response without `\\boxed{}`
scores 0. Answers match when they normalise to the same text or number (rewards/_answers.py). With
`with_think`, format_score is -`format_score_coef` unless the response has exactly one `<think>` before
exactly one `</think>` (Trinity-RFT passes these two from its workflow; here they are reward_fn_args).
"""

from typing import Any

from ._answers import equivalent, last_boxed


def thinks_once(response: str) -> bool:
    """Exactly one <think> and one </think>, in that order."""
    if response.count("<think>") != 1 or response.count("</think>") != 1:
        return False
    return response.index("<think>") < response.index("</think>")


def math_boxed_reward(
    response: str, truth: Any, with_think: bool = False, format_score_coef: float = 0.1
) -> dict[str, float]:
    """accuracy: the boxed answers match; format_score: -format_score_coef for a missing think block (with_think)."""
    truth = str(truth)
    reference = last_boxed(truth)
    correct = equivalent(last_boxed(response), truth if reference is None else reference)
    penalty = -format_score_coef if with_think and not thinks_once(response) else 0.0
    return {"accuracy": float(correct), "format_score": penalty}
