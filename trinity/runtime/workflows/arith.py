"""`arith_workflow`: the embedded demo's task. Each response is scored by the taskset's reward function against
the row's reference; without one, by `exact_match`: exactly the reference (digits, then the end of sequence),
reward 1, else 0."""

from .base import Workflow


class ArithWorkflow(Workflow):
    """Scores each response against the row's reference; `exact_match` unless the taskset names another."""

    arguments: dict = {}
    default_reward = "exact_match"
    uses_tokenizer = False  # its prompt, encoded

    def run(self):
        truth = self.task.row[self.task.format.response_key]
        prompt = self.model.prompt(self.task)
        return [self.score(c, truth, prompt) for c in self.model.generate(prompt, self.task.repeat_times)]
