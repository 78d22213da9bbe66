"""`arith_workflow`: the embedded demo's task. The response must be exactly the reference (digits,
then the end of sequence): reward 1, else 0."""

from .base import Workflow


class ArithWorkflow(Workflow):
    """Exact-match reward against the row's reference."""

    def run(self):
        reference = str(self.task.row[self.task.format.response_key]).strip()
        prompt = self.model.prompt(self.task)
        return [
            self.experience(c, float(c.text.strip() == reference))
            for c in self.model.generate(prompt, self.task.repeat_times)
        ]
