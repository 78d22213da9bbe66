"""`math_ruler_workflow`: math answered in a chat, the group's answers scored against each other by a judge model.

As Trinity-RFT's `MathRULERWorkflow` (trinity/common/workflows/math_ruler_workflow.py, after OpenPipe ART's RULER):
the model answers the row's prompt `repeat_times` times in one chat call; the taskset's reward function (math_reward
unless it names another) scores each answer against the row's reference, and that "gold" score is only reported
(the metrics, and `gold_reward`, their sum); the reward trained on is the judge's. The judge is the first auxiliary
model (explorer.auxiliary_models[0], `self.auxiliary_models[0]`: the OpenAI client of its engines' endpoint), asked
once per task with the question and every candidate answer, to reply with one score in [0, 1] per candidate as a list
ending its reply. Its scores are clipped to [0, 1]; a reply without a readable list of as many numbers gives every
candidate 0 (upstream's fallback), and `judge_success` says which happened. Upstream reads the list with Python's
eval; here it is parsed as a literal list of numbers only.
"""

import ast
from typing import Any

from ..data.prompts import prompt_messages
from .base import Workflow

JUDGE_SYSTEM = (
    "You judge fairly. The user gives a question and {n} candidate solutions to it. Compare the solutions, decide "
    "how well each one resolves the question, and give each a score between 0 and 1."
)
JUDGE_USER = """Here is a question and {n} candidate solutions to it.

Question: {question}

{solutions}

Give each solution a score between 0 and 1 for how well it solves the question. You may compare them and reason step
by step first, briefly. End your reply with the scores as one list, in the solutions' order:
[score of solution 1, score of solution 2, ..., score of solution {n}]"""


class MathRulerWorkflow(Workflow):
    """Chat answers scored by the judge (the first auxiliary model) against each other; the reference's scores are
    reported beside them."""

    arguments: dict = {}
    default_reward = "math_reward"  # the gold score, reported only

    def run(self):
        if not self.auxiliary_models:
            raise ValueError(
                "math_ruler_workflow asks its judge, the first auxiliary model: set explorer.auxiliary_models"
            )
        messages = prompt_messages(self.task.row, self.task.format)
        truth = self.task.row.get(self.task.format.response_key)
        asked = messages + (
            [{"role": "assistant", "content": self.task.format.reply_prefix}] if self.task.format.reply_prefix else []
        )
        completions = self.model.chat(self.task, messages, self.task.repeat_times)
        question = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        judged, scores = self.ruler(question, [c.text for c in completions])
        experiences = []
        for completion, score in zip(completions, scores):
            gold = self.judge(completion.text, truth, messages=asked)
            metrics = {**gold, "gold_reward": sum(gold.values()), "judge_success": float(judged)}
            experiences.append(self.experience(completion, score, **metrics))
        return experiences

    def ruler(self, question: str, answers: list[str]) -> tuple[bool, list[float]]:
        """(whether the judge's reply held a score for each answer, the scores clipped to [0, 1]; all 0 if not)."""
        judge = self.auxiliary_models[0]
        n = len(answers)
        solutions = "\n\n".join(f"Candidate solution {i + 1}: {text}" for i, text in enumerate(answers))
        reply = judge.chat.completions.create(
            model=judge.model_path,
            messages=[
                {"role": "system", "content": JUDGE_SYSTEM.format(n=n)},
                {"role": "user", "content": JUDGE_USER.format(n=n, question=question, solutions=solutions)},
            ],
        )
        scores = scores_in(reply.choices[0].message.content or "", n)
        return (True, scores) if scores is not None else (False, [0.0] * n)


def scores_in(text: str, n: int) -> list[float] | None:
    """The last [..] list of `text` as `n` numbers clipped to [0, 1]; None when there is none of that length."""
    start, end = text.rfind("["), text.rfind("]")
    if start == -1 or end < start:
        return None
    try:
        found: Any = ast.literal_eval(text[start : end + 1])
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(found, list) or len(found) != n:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in found):
        return None
    return [min(1.0, max(0.0, float(x))) for x in found]
