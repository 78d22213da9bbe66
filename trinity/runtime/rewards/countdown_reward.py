"""`countdown_reward` (TinyZero's Countdown): an equation that uses each given number once and makes the target.

The reference is `{"target": 24, "numbers": [3, 8, 2]}` (JSON text, or that dict). The equation is the
last `<answer>...</answer>` on the response's last line. accuracy 1 when it uses exactly the given
numbers, each once, and evaluates to the target; otherwise format_score 0.1 for an equation that is
there but wrong, and 0 for none. Only + - * / and brackets count as arithmetic (no powers, no `//`).
"""

import ast
import json
import operator
import re
from typing import Any

_ANSWER = re.compile(r"<answer>(.*?)</answer>")
_ARITHMETIC = re.compile(r"^[\d+\-*/().\s]+$")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def puzzle(truth: Any) -> tuple[float, list[int]]:
    """(target, numbers) of a reference."""
    data = json.loads(truth) if isinstance(truth, str) else truth
    try:
        return float(data["target"]), [int(n) for n in data["numbers"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a countdown reference is {{'target': ..., 'numbers': [...]}}, not {truth!r}") from exc


def equation(response: str) -> str | None:
    """The last <answer>...</answer> on the response's last line, trimmed; None when there is none."""
    found = _ANSWER.findall(response.split("\n")[-1])
    return found[-1].strip() if found else None


def evaluate(text: str) -> float | None:
    """The value of an arithmetic expression of numbers, + - * / and brackets; None when it is anything else."""
    if not _ARITHMETIC.match(text):
        return None
    try:
        return _value(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    raise ValueError(f"not arithmetic: {ast.dump(node)}")


def countdown_reward(response: str, truth: Any) -> dict[str, float]:
    """accuracy 1 for a valid equation making the target; format_score 0.1 for one that is there but wrong."""
    target, numbers = puzzle(truth)
    found = equation(response)
    if found is None:
        return {"accuracy": 0.0, "format_score": 0.0}
    uses_each_once = sorted(int(n) for n in re.findall(r"\d+", found)) == sorted(numbers)
    result = evaluate(found) if uses_each_once else None
    correct = result is not None and abs(result - target) < 1e-5
    return {"accuracy": float(correct), "format_score": 0.0 if correct else 0.1}
