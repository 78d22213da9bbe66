"""The model client every workflow receives: prompt formatting, chat templates and generation on one engine (through
its gatherer), and the engine's OpenAI endpoint with every call recorded."""

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where they run: the explorer's process imports them as its setup needs them
    from ...config.schema.explorer import InferenceModelConfig
    from ..data.tokenizer import Tokenizer
    from ..rollout.gather import Gatherer
    from ..rollout.samples import Sampling
    from ..workflows.base import Task
    from ..workflows.conversation import ChatTemplate, Conversation


class TaskClient:
    """What every model client of a task shares (ModelClient on trinity's engines, external.ExternalModelClient on an
    API): the auxiliary models, the timeout's cut, the chat template's enable_thinking."""

    # an `openai.OpenAI` client of each auxiliary model's endpoint (the explorer sets them; Workflow.auxiliary_models)
    auxiliary_models: list = []
    rollout: Any  # explorer.rollout_model
    cut: Any = None  # a threading.Event the explorer sets when the task ran past its timeout (runners.py)

    def _check_cut(self) -> None:
        """A task cut by its timeout asks the model nothing more: its workflow ends at its next call."""
        if self.cut is not None and self.cut.is_set():
            from .runners import TaskCut

            raise TaskCut("the task ran past its timeout: its runner gave up on it")

    def thinking(self, task: "Task") -> bool | None:
        """The chat template's enable_thinking for the task's prompts: its taskset's format.enable_thinking, else the
        rollout model's (null: the template's own default)."""
        own = getattr(task.format, "enable_thinking", None)
        return own if own is not None else self.rollout.enable_thinking


class ModelClient(TaskClient):
    """The model client a workflow sees: prompt formatting and generation on one engine (through its gatherer)."""

    def __init__(
        self,
        engine: "Gatherer",
        tokenizer: "Tokenizer",
        sampling: "Sampling",
        rollout: "InferenceModelConfig",
        endpoint: Any = None,
    ):
        # the engines' own limits (explorer.rollout_model's, model.*'s unless set there): a reply's least tokens, and a
        # prompt's most (None: prompts go whole), as Trinity-RFT's engines apply theirs to every call
        self.engine, self.tokenizer, self.rollout = engine, tokenizer, rollout
        self.sampling = replace(sampling, min_tokens=rollout.min_response_tokens or 0)
        self.max_prompt_tokens = rollout.max_prompt_tokens if rollout.enable_prompt_truncation else None
        self.endpoint = endpoint  # an openai.OpenAI client of the engine's OpenAI endpoint (None: not served)
        from .replies import Replies

        self.replies = Replies()  # what the engines answered, to complete the workflow's experiences (replies.py)

    def openai_client(self) -> Any:
        """An `openai.OpenAI` client of this task's engine endpoint, in a session of its own: every call made through
        it is recorded with the engine's token ids and log-probs (`recorded_calls`); what a request leaves out is
        sampled as the taskset says (rollout_args). It shares the explorer's connections: do not close it."""
        if self.endpoint is None:
            raise RuntimeError(
                "this workflow calls the engines' OpenAI endpoint, which is not served: set "
                "explorer.rollout_model.enable_openai_api: true"
            )
        import json
        import uuid
        from dataclasses import asdict

        from ..rollout.history import SAMPLING_HEADER, SESSION_HEADER

        headers = {SESSION_HEADER: uuid.uuid4().hex, SAMPLING_HEADER: json.dumps(asdict(self.sampling))}
        return self.endpoint.with_options(default_headers=headers)

    def recorded_calls(self, client: Any) -> list:
        """The calls made through `client` (rollout.history.RecordedCall), in order, each once."""
        import ray

        from ..rollout.history import SESSION_HEADER

        return ray.get(self.engine.engine.history.remote(client.default_headers[SESSION_HEADER]))

    def prompt(self, task: "Task") -> str:
        from ..data.prompts import prompt_text

        return prompt_text(task.row, task.format, self.tokenizer, self.thinking(task), self.rollout.chat_template)

    def generate(self, prompt: str, n: int) -> list:
        from ..workflows import Completion

        self._check_cut()
        ids, truncated = fit_prompt(self.tokenizer.encode(prompt, add_special_tokens=False), self.max_prompt_tokens)
        version, samples = self.engine.generate(ids, n, self.sampling)
        self.replies.add(ids, samples)
        return [Completion(ids, s.response_ids, s.logprobs, s.text, version, truncated, s.stopped) for s in samples]

    def chat(self, task: "Task", messages: list[dict], n: int, tools: list[dict] | None = None) -> list:
        from ..data.prompts import tools_of

        template = self._template(task, tools if tools is not None else tools_of(task.row, task.format))
        return self.generate(template.render(messages, generation_prompt=True) + (task.format.reply_prefix or ""), n)

    def conversation(
        self, task: "Task", messages: list[dict] | None = None, tools: list[dict] | None = None
    ) -> "Conversation":
        from ..data.prompts import prompt_messages, tools_of
        from ..workflows.conversation import Conversation, ConversationError

        if task.format.reply_prefix:
            raise ConversationError("format.reply_prefix is for single-turn prompts; a conversation has none")
        template = self._template(task, tools if tools is not None else tools_of(task.row, task.format))
        opening = prompt_messages(task.row, task.format) if messages is None else messages
        return Conversation(template, opening, self.rollout.max_model_len)

    def _template(self, task: "Task", tools: list[dict] | None) -> "ChatTemplate":
        """The task's chat template (its data set's, else the rollout model's, else the tokenizer's), with `tools`."""
        from ..data.prompts import template_of
        from ..workflows.conversation import ChatTemplate

        return ChatTemplate(
            self.tokenizer, template_of(task.format, self.rollout.chat_template), self.thinking(task), tools
        )

    def reply(self, conversations: list) -> None:
        self._check_cut()
        turns = []  # (conversation, its token budget) of those with room for a reply
        for c in conversations:
            room = c.room()
            budget = self.sampling.max_tokens if room is None else min(self.sampling.max_tokens, room)
            if c.truncated or budget <= 0:
                c.truncated = True  # the context is full: the episode ends here
            else:
                turns.append((c, budget))
        if not turns:
            return
        # min_tokens above a context-cut budget would be refused (vLLM) for the whole gathered call
        sampled = [replace(self.sampling, max_tokens=b, min_tokens=min(self.sampling.min_tokens, b)) for _, b in turns]
        requests = [(c.context(), 1, sampling) for (c, _), sampling in zip(turns, sampled)]
        for (c, budget), (context, _, _), (version, (sample,)) in zip(
            turns, requests, self.engine.generate_each(requests)
        ):
            self.replies.add(context, [sample])
            c.add_reply(sample.response_ids, sample.logprobs, sample.text, version)
            # cut by the context rather than by max_tokens: the episode cannot go on
            c.truncated = budget < self.sampling.max_tokens and not sample.stopped


def fit_prompt(ids: list[int], limit: int | None) -> tuple[list[int], bool]:
    """(the prompt's last `limit` tokens, whether any were cut); a None limit keeps it whole."""
    if limit is None or len(ids) <= limit:
        return ids, False
    return ids[-limit:], True  # the end holds the question and the chat template's cue to answer
