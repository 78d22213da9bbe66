"""`math_workflow`: GSM8K-style math. The reference's final answer (`#### 42`, `\\boxed{42}`, or its
last number) against the response's; reward 1 for the same number, else 0, plus an optional
format reward for answering in the asked form."""

import re

from .base import Workflow

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


class MathWorkflow(Workflow):
    """reward = 1 if the final answers match (+ format_reward when marked with #### or \\boxed{})."""

    def run(self):
        args = self.task.reward_fn_args
        format_reward = float(args.get("format_reward", 0.0))
        reference = final_answer(str(self.task.row[self.task.format.response_key]))
        prompt = self.model.prompt(self.task)
        out = []
        for completion in self.model.generate(prompt, self.task.repeat_times):
            correct = reference is not None and final_answer(completion.text) == reference
            bonus = format_reward if answered_in_form(completion.text) else 0.0
            out.append(self.experience(completion, float(correct) + bonus, accuracy=float(correct)))
        return out
