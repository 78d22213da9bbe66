"""`math_rm_workflow` (and `async_math_rm_workflow`): math answered in a chat, scored by a reward model or judge.

As Trinity-RFT's `MathRMWorkflow` (trinity/common/workflows/math_rm_workflow.py): the row's prompt becomes messages (the
system prompt, the prompt as the user's, the reply prefix as the assistant's opening), the model answers them in one
call of `repeat_times` replies through the chat template, and the taskset's reward function (it names one: this
workflow has no default) scores each reply with the conversation it answers (`messages`, which a judge reads) and
the row's reference. The reward is the sum of its scores, as upstream's: with trajectory_accuracy_grader_reward that
is the raw grade plus the normalised one, an affine function of the grade that a group's normalised advantages read
the same as the grade itself."""

from ..data.prompts import prompt_messages
from .base import Workflow


class MathRMWorkflow(Workflow):
    """One chat turn per rollout, scored by the taskset's reward function with the conversation it answers."""

    arguments: dict = {}

    def run(self):
        messages = prompt_messages(self.task.row, self.task.format)
        truth = self.task.row.get(self.task.format.response_key)
        asked = messages + (
            [{"role": "assistant", "content": self.task.format.reply_prefix}] if self.task.format.reply_prefix else []
        )
        completions = self.model.chat(self.task, messages, self.task.repeat_times)
        return [self.score(c, truth, messages=asked) for c in completions]
