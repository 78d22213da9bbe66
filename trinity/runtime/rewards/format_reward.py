"""`format_reward`: does the whole response match `pattern`? format_score +0.1 if so, else -0.1.

The default pattern (Trinity-RFT's) asks for the reasoning in `<think>` and the answer in `<answer>`,
each tag on a line of its own. The reference is not read.
"""

import re
from typing import Any

from ...config.rewards import THINK_ANSWER


def format_reward(response: str, truth: Any = None, pattern: str = THINK_ANSWER) -> dict[str, float]:
    """{'format_score': 0.1} when the response matches `pattern` from its start, else -0.1."""
    return {"format_score": 0.1 if re.match(pattern, response, re.DOTALL | re.MULTILINE) else -0.1}
