"""`math_workflow`: GSM8K-style math. One prompt, `repeat_times` responses, each scored by the taskset's reward
function against the row's reference (`format.response_key`); without one, by `math_reward`: the final
answer (`#### 42`, `\\boxed{42}`, or the last number) against the reference's, plus an optional format
reward for answering in the asked form."""

from .base import Workflow


class MathWorkflow(Workflow):
    """Scores each response against the row's reference; `math_reward` unless the taskset names another."""

    arguments: dict = {}
    default_reward = "math_reward"
    uses_tokenizer = False  # its prompt, encoded

    def run(self):
        truth = self.task.row[self.task.format.response_key]
        prompt = self.model.prompt(self.task)
        return [self.score(c, truth, prompt) for c in self.model.generate(prompt, self.task.repeat_times)]
