"""`math_reward` (trinity's, GSM8K-style): the reference's final answer against the response's.

The final answer is what follows the last `####`, else the last `\\boxed{}`, else the last number;
`$1,234.00` and `1234` are the same. accuracy 1 for the same answer, else 0; `format_score` is
`format_reward` (an argument, default 0) when the response marks its answer with `####` or `\\boxed{}`.
Trinity-RFT's math_reward differs: it checks `<think>`/`<answer>` tags and compares with math-verify.
"""

import re
from typing import Any

BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
HASHES = re.compile(r"####\s*([^\n]*)")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def final_answer(text: str) -> str | None:
    """The final answer in `text`: after the last '####', else the last \\boxed{}, else the last number; normalised."""
    for pattern in (HASHES, BOXED):
        found = pattern.findall(text)
        if found:
            return normalise(found[-1])
    numbers = NUMBER.findall(text)
    return normalise(numbers[-1]) if numbers else None


def answered_in_form(text: str) -> bool:
    """Whether the response marks its answer with '####' or \\boxed{}."""
    return bool(HASHES.search(text) or BOXED.search(text))


def normalise(answer: str) -> str:
    """'$1,234.00' -> '1234'; text that is no number is kept, trimmed."""
    cleaned = answer.strip().rstrip(".").replace(",", "").replace("$", "").strip()
    try:
        number = float(cleaned)
    except ValueError:
        return cleaned
    return str(int(number)) if number.is_integer() else str(number)


def math_reward(response: str, truth: Any, format_reward: float = 0.0) -> dict[str, float]:
    """accuracy: the final answers match; format_score: `format_reward` for an answer marked with #### or \\boxed{}."""
    reference = final_answer(str(truth))
    correct = reference is not None and final_answer(response) == reference
    return {"accuracy": float(correct), "format_score": format_reward if answered_in_form(response) else 0.0}
