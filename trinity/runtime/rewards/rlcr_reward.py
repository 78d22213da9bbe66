"""`rlcr_reward`: RLCR's five weighted parts, for answers that state their confidence (Trinity-RFT's `rlcr_reward`,
trinity/common/rewards/rlcr_reward.py at cc24051).

A response in form ends with, in this order and nothing but blanks between them or after,
`<think>...</think><answer>...</answer><analysis>...</analysis><confidence>q</confidence>`, q a number in [0, 1], and
no tag of these four opened inside another anywhere in it. Each part is returned already weighted (`weights` names all
five; default format 0.5, accuracy 0.5, brier 0.5, mean_confidence 1e-5, confidence_one_or_zero 1e-5):
- `format`: 1 in form, else 0;
- `accuracy`: in form, 1 when the answer (its last `\\boxed{}`, else all of it) is the reference's (its `\\boxed{}`,
  else after `####`, else all of it) after rewards/_answers.py's normalisation; upstream checks with math-verify;
- `brier`: in form, 1 - (accuracy - q)^2, else 0;
- `mean_confidence`: the last closed `<confidence>` number in [0, 1] anywhere in the response (form or not), else 0;
- `confidence_one_or_zero`: 1 when that number is below 0.01 or above 0.99.
"""

import math
import re
from typing import Any

from ._answers import equivalent, last_boxed
from .accuracy_reward import reference_answer

PARTS = ("format", "accuracy", "brier", "mean_confidence", "confidence_one_or_zero")
WEIGHTS = {"format": 0.5, "accuracy": 0.5, "brier": 0.5, "mean_confidence": 1e-5, "confidence_one_or_zero": 1e-5}
_TAG = re.compile(r"</?(?:think|answer|analysis|confidence)>")
_TAIL = ("<think>", "</think>", "<answer>", "</answer>", "<analysis>", "</analysis>", "<confidence>", "</confidence>")


def confidence(payload: str) -> float | None:
    """A confidence's number: finite, in [0, 1]; None otherwise."""
    try:
        value = float(payload.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and 0.0 <= value <= 1.0 else None


def last_confidence(response: str) -> float | None:
    """The last closed <confidence> block's number, whether or not the response is in form."""
    start, end = response.rfind("<confidence>"), response.rfind("</confidence>")
    if start < 0 or end < start:
        return None
    payload = response[start + len("<confidence>") : end]
    return None if _TAG.search(payload) else confidence(payload)


def in_form(response: str) -> tuple[str, float] | None:
    """(answer, confidence) of a response ending in the four blocks, tags never nested; None otherwise."""
    tags = list(_TAG.finditer(response))
    opened = None
    for tag in tags:
        text = tag.group(0)
        name = text.strip("</>")
        if text.startswith("</"):
            if opened != name:
                return None
            opened = None
        elif opened is not None:
            return None
        else:
            opened = name
    tail = tags[-len(_TAIL) :]
    if opened is not None or tuple(t.group(0) for t in tail) != _TAIL:
        return None
    gaps = [response[tail[i].end() : tail[i + 1].start()] for i in (1, 3, 5)] + [response[tail[-1].end() :]]
    if any(gap.strip() for gap in gaps):
        return None
    stated = confidence(response[tail[6].end() : tail[7].start()])
    return None if stated is None else (response[tail[2].end() : tail[3].start()], stated)


def rlcr_reward(response: str, truth: Any, weights: dict[str, float] | None = None) -> dict[str, float]:
    """The five parts, each times its weight."""
    weights = weights or WEIGHTS
    stated = last_confidence(response)
    parts = {
        "format": 0.0,
        "accuracy": 0.0,
        "brier": 0.0,
        "mean_confidence": stated if stated is not None else 0.0,
        "confidence_one_or_zero": float(stated is not None and (stated < 0.01 or stated > 0.99)),
    }
    form = in_form(response)
    if form is not None:
        answer, q = form
        right = float(truth is not None and equivalent(_answer(answer), reference_answer(str(truth))))
        parts |= {"format": 1.0, "accuracy": right, "brier": 1.0 - (right - q) ** 2}
    return {name: weights[name] * value for name, value in parts.items()}


def _answer(text: str) -> str:
    boxed = last_boxed(text)
    return boxed if boxed is not None else text.strip()
