"""An external (API) model as the rollout model (Trinity-RFT's `model.external_model`, mode bench): the workflows ask an
OpenAI-compatible endpoint through the real `openai` client instead of trinity's engines.

The endpoint's URL and key come from the environment variables the config names (`base_url_env`, `api_key_env`): the
driver checks them before Ray starts (`issues`) and hands them to the explorer alone (launch/runtime_env.py). The key
never appears in a message: every error text passes through `External.masked`.

The API answers text, not token ids, so the model client here serves the single-turn calls (`prompt`, `generate`,
`chat`): a completion carries the reply's text and whether it ended by itself, with no tokens or log-probs (an
evaluation reads rewards only). A multi-turn conversation in the chat template's tokens, or an agent's recorded calls,
are refused with what to run instead (derive/external.py refuses the built-in workflows that need them at validate).
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...config.redact import MASK
from ...config.schema import RunConfig
from ...errors import Issue
from .model_client import TaskClient
from .replies import Replies

if TYPE_CHECKING:
    from ...config.resolve import ResolvedConfig
    from ..rollout.samples import Sampling
    from ..workflows.base import Task

EMPTY_KEY = "EMPTY"  # the key sent where api_key_env is unset (Trinity-RFT's, and what a local vLLM server takes)
PROBE_TIMEOUT_S = 10.0  # the driver's look at the endpoint before Ray starts


class ExternalModelError(RuntimeError):
    """The external model cannot answer this call (what the API said, its key masked), or this call needs what an API
    model does not give (token ids)."""


def api_url(value: str) -> str:
    """The base URL the client asks: `value` without a trailing slash, ending in /v1 (Trinity-RFT 0.6.0 appends /v1 to
    the variable's URL; written with it, it is kept as it is)."""
    url = value.strip().rstrip("/")
    return url if url.endswith("/v1") else f"{url}/v1"


@dataclass(frozen=True)
class External:
    """The endpoint of the run's external model: its base URL, key and model name, from the environment."""

    url: str
    key: str
    model: str
    url_env: str
    key_env: str

    @classmethod
    def of(cls, config: RunConfig, environ: Mapping[str, str] | None = None) -> "External":
        external = config.model.external_model
        environ = os.environ if environ is None else environ
        url = environ.get(external.base_url_env, "")
        if not url.strip():
            raise ExternalModelError(
                f"{external.base_url_env} (model.external_model.base_url_env) is not set: it holds the external "
                "model's API URL"
            )
        key = environ.get(external.api_key_env) or EMPTY_KEY
        return cls(api_url(url), key, external.model_name or "", external.base_url_env, external.api_key_env)

    def masked(self, text: str) -> str:
        """`text` with the API key masked (an API may echo it back in an error)."""
        return text.replace(self.key, MASK) if self.key != EMPTY_KEY and self.key else text

    def client(self, timeout_s: float, max_retries: int = 2) -> Any:
        """A real `openai.OpenAI` client of the endpoint."""
        import openai

        return openai.OpenAI(base_url=self.url, api_key=self.key, timeout=timeout_s, max_retries=max_retries)

    def error(self, exc: Exception) -> ExternalModelError:
        """What went wrong asking the API, said with what to check and the key masked."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            body = exc.body if isinstance(exc.body, dict) else {}  # the client keeps the answer's `error` object
            said = self.masked(str(body.get("message") or exc.message))
            what = f"the external model's API at {self.url} answered {exc.status_code}: {said}"
            if exc.status_code in (401, 403):
                what += f" (check the key in {self.key_env}, model.external_model.api_key_env)"
            elif exc.status_code == 404:
                what += f" (check model.external_model.model_name={self.model!r} and {self.url_env})"
            return ExternalModelError(what)
        if isinstance(exc, openai.APITimeoutError):
            return ExternalModelError(f"the external model's API at {self.url} did not answer in time")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return ExternalModelError(
                f"cannot reach the external model's API at {self.url} ({self.url_env}): "
                f"{self.masked(f'{type(cause).__name__}: {cause}')}"
            )
        return ExternalModelError(self.masked(f"{type(exc).__name__}: {exc}"))


def issues(resolved: "ResolvedConfig", environ: Mapping[str, str] | None = None) -> list[Issue]:
    """Before Ray starts: the URL's variable is set, the endpoint answers with the key, and lists the model (where it
    lists models at all). Nothing for a run without an external model."""
    config = resolved.config
    external = config.model.external_model
    if not external.enable:
        return []
    where = resolved.provenance.where(("model", "external_model", "base_url_env"))
    try:
        api = External.of(config, environ)
    except ExternalModelError as exc:
        hint = f"export {external.base_url_env}=https://<host>/v1 (the API's OpenAI-compatible URL) where trinity runs"
        return [Issue(str(exc), key="model.external_model.base_url_env", source=where or "schema default", hint=hint)]
    import openai

    try:
        listed = [m.id for m in api.client(PROBE_TIMEOUT_S, max_retries=0).models.list()]
    except openai.NotFoundError:
        return []  # an API without a model list: its first request says whether it serves the model
    except Exception as exc:  # noqa: BLE001 (every failure of the probe is reported, worded)
        key = "model.external_model.api_key_env" if _refused(exc) else "model.external_model.base_url_env"
        hint = (
            f"export the API's key in {external.api_key_env}"
            if _refused(exc)
            else f"check {external.base_url_env} and that this machine reaches it"
        )
        source = resolved.provenance.where(tuple(key.split("."))) or "schema default"
        return [Issue(str(api.error(exc)), key=key, source=source, hint=hint)]
    if listed and api.model not in listed:
        shown = ", ".join(listed[:10]) + (f" and {len(listed) - 10} more" if len(listed) > 10 else "")
        return [
            Issue(
                f"the external model's API at {api.url} serves no model {api.model!r} (it lists {shown})",
                key="model.external_model.model_name",
                source=resolved.provenance.where(("model", "external_model", "model_name")) or "schema default",
                hint="set model.external_model.model_name to one of the models it lists",
            )
        ]
    return []


def _refused(exc: Exception) -> bool:
    import openai

    return isinstance(exc, openai.APIStatusError) and exc.status_code in (401, 403)


def _no_reply_prefix(task: "Task") -> None:
    if task.format.reply_prefix:
        raise ExternalModelError(
            "format.reply_prefix begins the model's reply, and an external (API) model's reply cannot be begun for "
            "it: remove the taskset's reply_prefix"
        )


def _no_conversations() -> ExternalModelError:
    return ExternalModelError(
        "this workflow holds a multi-turn conversation in the chat template's tokens, and an external (API) model "
        "answers text without token ids: run a single-turn workflow (math_workflow, math_boxed_workflow, ...) on it, "
        "or this one on trinity's engines"
    )


class ExternalModelClient(TaskClient):
    """The model client a workflow sees (workflows/base.py ModelClient) where the rollout model is an external API:
    each `generate` or `chat` is one chat-completions request (more where the API gives fewer than `n` choices)."""

    tokenizer = None  # the API's model's tokenizer is not here: its replies carry text only

    def __init__(self, api: External, client: Any, sampling: "Sampling", rollout: Any) -> None:
        self.api, self.client, self.sampling, self.rollout = api, client, sampling, rollout
        self.replies = Replies()  # nothing to complete: an API reply has no tokens (the explorer asks all clients)
        # a task's prompt text -> (the messages it stands for, the chat template's enable_thinking for them)
        self._asked: dict[str, tuple[list[dict], bool | None]] = {}

    def prompt(self, task: "Task") -> str:
        """The task's prompt as text (its messages, one per line); `generate` of that text asks the messages."""
        from ..data.prompts import prompt_messages

        _no_reply_prefix(task)
        messages = prompt_messages(task.row, task.format)
        text = "\n".join(f"{m['role']}: {m['content']}" for m in messages)
        self._asked[text] = (messages, self.thinking(task))
        return text

    def generate(self, prompt: str, n: int) -> list:
        """`n` replies to `prompt`: the task's messages where it is the task's prompt, else one user message."""
        messages, thinking = self._asked.get(prompt) or ([{"role": "user", "content": prompt}], None)
        return self._ask(messages, n, None, thinking)

    def chat(self, task: "Task", messages: list[dict], n: int, tools: list[dict] | None = None) -> list:
        """`n` replies to `messages` (with `tools`: the row's unless given), as the API's chat template renders them."""
        from ..data.prompts import tools_of

        _no_reply_prefix(task)
        tools = tools if tools is not None else tools_of(task.row, task.format)
        return self._ask(messages, n, tools, self.thinking(task))

    def conversation(self, task: "Task", messages: list[dict] | None = None, tools: list[dict] | None = None) -> Any:
        raise _no_conversations()

    def reply(self, conversations: list) -> None:
        raise _no_conversations()

    def openai_client(self) -> Any:
        """The `openai.OpenAI` client of the external API itself (its requests name model.external_model.model_name;
        nothing is sampled for them)."""
        return self.client

    def recorded_calls(self, client: Any) -> list:
        raise ExternalModelError(
            "an external (API) model's calls carry no token ids to record: this workflow's experiences cannot be "
            "built from them; run it on trinity's engines"
        )

    def _ask(self, messages: list[dict], n: int, tools: list[dict] | None, thinking: bool | None) -> list:
        from ..workflows import Completion

        self._check_cut()

        request: dict[str, Any] = {
            "model": self.api.model,
            "messages": messages,
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "max_tokens": self.sampling.max_tokens,
        }
        if tools:
            request["tools"] = tools
        if thinking is not None:  # as Trinity-RFT asks an API model: through the chat template's arguments
            request["extra_body"] = {"chat_template_kwargs": {"enable_thinking": thinking}}
        choices: list = []
        while len(choices) < n:  # an API may give fewer choices than asked (or refuse n > 1 silently)
            wanted = n - len(choices)
            try:
                response = self.client.chat.completions.create(**request, **({"n": wanted} if wanted > 1 else {}))
            except Exception as exc:  # noqa: BLE001 (said again with the key masked and what to check)
                raise self.api.error(exc) from None
            if not response.choices:
                raise ExternalModelError(f"the external model's API at {self.api.url} answered no choices")
            choices += response.choices[:wanted]
        return [Completion([], [], [], c.message.content or "", 0, False, c.finish_reason != "length") for c in choices]
