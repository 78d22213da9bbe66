"""`react_agent_workflow`: a ReAct agent written against the `openai` package, run over the engines' OpenAI endpoint
(`explorer.rollout_model.enable_openai_api`), on the calculator task (examples/arith_react).

The agent (`react`) is plain OpenAI client code, as it would be outside trinity: it asks the model with the
`calculate` tool offered, runs the tool calls the endpoint parsed from the reply (`tool_call_parser`), sends their
results back as tool messages, and takes the first reply without a call as its answer; a call on the last of
`max_turns` turns is not run (no turn is left to read it). The endpoint recorded every call with the engine's token
ids and log-probs; the episode's calls become its experience (rollout/episodes.py), reward 1 for a right answer (the
taskset's reward function, `exact_match` unless it names another), else 0. `repeat_times` agents of a task run at
once, each in its own session; what their requests leave out is sampled by the taskset's rollout_args.
"""

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..experience import Experience
from ..rollout import episodes
from .base import Workflow, positive
from .calculator import calculate
from .toolbox import Toolbox


def react(client: Any, model: str, messages: list[dict], toolbox: Toolbox, max_turns: int) -> tuple[str | None, bool]:
    """(the agent's answer, or None without one; whether the context ran out), asking `client`'s `model`."""
    import openai

    messages = list(messages)
    for turn in range(1, max_turns + 1):
        try:
            completion = client.chat.completions.create(model=model, messages=messages, tools=toolbox.schemas())
        except openai.BadRequestError as exc:
            if "max_model_len" in str(exc):  # the conversation fills the context: the episode ends here
                return None, True
            raise
        reply = completion.choices[0].message
        if not reply.tool_calls:
            return reply.content or "", False
        if turn == max_turns:
            break
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls:
            result = toolbox.answer(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return None, False


class ReactAgentWorkflow(Workflow):
    """A ReAct agent with a calculator, over the OpenAI endpoint: a right answer within `max_turns` earns 1."""

    default_reward = "exact_match"
    uses_tokenizer = False  # the engine's endpoint renders its turns
    arguments = {"max_turns": 3}

    @classmethod
    def check_values(cls, args: dict) -> None:
        super().check_values(args)
        positive(cls, args, "max_turns")

    def run(self) -> list[Experience]:
        from ..data.prompts import prompt_messages

        opening = prompt_messages(self.task.row, self.task.format)
        truth = str(self.task.row[self.task.format.response_key])
        model = self.model.openai_client().models.list().data[0].id  # the served model's name, as agents ask it
        with ThreadPoolExecutor(self.task.repeat_times) as pool:
            played = list(pool.map(lambda _: self._episode(model, opening, truth), range(self.task.repeat_times)))
        return [exp for exps in played for exp in exps]

    def _episode(self, model: str, opening: list[dict], truth: str) -> list[Experience]:
        toolbox = Toolbox({"calculate": calculate})
        client = self.model.openai_client()
        try:
            answer, full = react(client, model, opening, toolbox, self.arg("max_turns"))
        finally:  # taken also when the agent fails, so the endpoint keeps no episode nobody will take
            calls = self.model.recorded_calls(client)
        if not calls:
            raise RuntimeError("the agent's endpoint recorded no call")
        tokens = len(calls[-1].response_ids)
        right = answer is not None and self.right(answer, truth, tokens)
        metrics = {"tool_calls": float(toolbox.calls), "tool_errors": float(toolbox.errors)}
        return episodes.experiences(
            calls, float(right), self.task.uid, uuid.uuid4().hex, **metrics, **({"truncated": 1.0} if full else {})
        )
