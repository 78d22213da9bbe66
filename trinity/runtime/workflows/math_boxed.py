"""`math_boxed_workflow` (and `async_math_boxed_workflow`): math whose answers come in `\\boxed{}`.

As Trinity-RFT's `MathBoxedWorkflow` (trinity/common/workflows/customized_math_workflows.py):
- the system prompt is the taskset's, else one asking for the answer in `\\boxed{}` (with `with_think`, one also asking
  for the reasoning in `<think></think>` first);
- `use_base: true` prompts a base model with plain text, `System:<system prompt>\\nUser:\\n<prompt>\\nAssistant:\\n`,
  instead of the chat template;
- each reply is scored by the taskset's reward function, else `math_boxed_reward`; math_boxed_reward takes
  `with_think` and `format_score_coef` from workflow_args (upstream passes them with every call);
- a reply cut at its token budget is kept for its group's advantage but not trained on (its action mask all 0:
  upstream's mask of a `response_truncated` experience).
"""

from ...config.workflow_args import MathBoxedArgs
from ..data.prompts import prompt_messages
from ..rewards import bind
from .base import Completion, Workflow

BOXED = "Please reason step by step, and put your final answer within \\boxed{}."
BOXED_WITH_THINK = (
    "You are a helpful assistant that solves MATH problems. You should first thinks about the reasoning process in "
    "mind and then provides the user with the answer. You should present your reasoning process using the format: "
    "<think>\n ...your reasoning process here... </think>\n first. You should always include your final answer in "
    "\\boxed{} as closed-form results."
)


class MathBoxedWorkflow(Workflow):
    """Chat (or, with use_base, plain-text) prompts; answers in \\boxed{} scored by math_boxed_reward by default."""

    args_model = MathBoxedArgs
    default_reward = "math_boxed_reward"

    def run(self):
        settings = self.settings()
        self._boxed_reward(settings)
        fmt = self.task.format
        fmt = fmt if fmt.system_prompt else fmt.model_copy(update={"system_prompt": self._system(settings)})
        messages = prompt_messages(self.task.row, fmt)
        truth = self.task.row[fmt.response_key]
        if settings.use_base:
            prompt = _plain(messages) + (fmt.reply_prefix or "")
            completions = self.model.generate(prompt, self.task.repeat_times)
        else:
            prompt = ""
            completions = self.model.chat(self.task, messages, self.task.repeat_times)
        return [self._scored(c, truth, prompt) for c in completions]

    def _boxed_reward(self, settings: MathBoxedArgs) -> None:
        """math_boxed_reward (the default, or named) with workflow_args' with_think and format_score_coef."""
        if self.reward_fn.name == "math_boxed_reward":
            think = {"with_think": settings.with_think, "format_score_coef": settings.format_score_coef}
            self.reward_fn = bind("math_boxed_reward", {**self.reward_fn.args, **think})

    @staticmethod
    def _system(settings: MathBoxedArgs) -> str:
        return BOXED_WITH_THINK if settings.with_think else BOXED

    def _scored(self, completion: Completion, truth, prompt: str):
        exp = self.score(completion, truth, prompt)
        exp.metrics["response_truncated"] = float(not completion.stopped)
        if not completion.stopped:  # cut at its budget: counted in its group, not trained on
            exp.action_mask = [0] * len(exp.response_ids)
        return exp


def _plain(messages: list[dict]) -> str:
    """Upstream's base-model prompt: 'System:' and the system prompt, then the user's turn, then 'Assistant:'."""
    system = next((m["content"] for m in messages if m["role"] == "system"), None)
    user = "\n".join(m["content"] for m in messages if m["role"] == "user")
    head = f"System:{system}\n" if system else ""
    return f"{head}User:\n{user}\nAssistant:\n"
