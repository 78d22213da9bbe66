"""`accuracy_reward`: is the response's answer mathematically the reference's? accuracy 1 or 0.

The response's answer is its last `\\boxed{}`, else its last number; the reference's is its last
`\\boxed{}`, else what follows `####`, else the whole reference. They match when they normalise to the
same text or number (rewards/_answers.py). Trinity-RFT checks with the math-verify package, which also
proves symbolic equalities (`2x+1` = `1+2x`); trinity does not install it, so those count as different.
"""

import re
from typing import Any

from ._answers import equivalent, last_boxed

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def response_answer(response: str) -> str | None:
    """The last \\boxed{} of the response, else its last number."""
    boxed = last_boxed(response)
    if boxed is not None:
        return boxed
    numbers = _NUMBER.findall(response)
    return numbers[-1] if numbers else None


def reference_answer(truth: str) -> str:
    """The last \\boxed{} of the reference, else what follows its last '####', else the reference itself."""
    boxed = last_boxed(truth)
    if boxed is not None:
        return boxed
    return truth.rsplit("####", 1)[-1] if "####" in truth else truth


def accuracy_reward(response: str, truth: Any) -> dict[str, float]:
    """{'accuracy': 1.0} when the response's answer is the reference's, else 0."""
    return {"accuracy": float(equivalent(response_answer(response), reference_answer(str(truth))))}
