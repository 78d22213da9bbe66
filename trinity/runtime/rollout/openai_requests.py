"""The requests the OpenAI endpoint takes: OpenAI's fields that the engines honour, and vLLM's extensions to them.

A field outside these is refused by name (never accepted and ignored); so are streaming, top alternatives to each
token's log-prob, and a forced tool choice.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ApiError(Exception):
    """An error the endpoint answers with, in OpenAI's error body."""

    KINDS = {
        400: "BadRequestError",
        401: "AuthenticationError",
        404: "NotFoundError",
        500: "InternalServerError",
        503: "ServiceUnavailableError",
    }

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param

    def body(self) -> dict:
        """OpenAI's error JSON: what the openai package raises from."""
        return {"error": {"message": self.message, "type": self.KINDS[self.status], "param": self.param,
                          "code": self.status}}  # fmt: skip


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    n: int = Field(1, ge=1, le=1024)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=-1)  # vLLM's extension; -1 or 0: none
    max_tokens: int | None = Field(None, ge=1)
    min_tokens: int | None = Field(None, ge=0)  # vLLM's extension
    repetition_penalty: float | None = Field(None, gt=0)  # vLLM's extension
    stream: Literal[False] = False
    return_token_ids: bool = False  # vLLM's extension: prompt_token_ids, and token_ids on each choice
    user: str | None = None  # OpenAI's end-user tag: the endpoint logs nothing, so it has no effect to lose


class ChatRequest(_Request):
    """POST /v1/chat/completions."""

    messages: list[dict] = Field(min_length=1)
    tools: list[dict] | None = None
    tool_choice: Literal["auto", "none"] | None = None
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: Literal[0] | None = None

    @model_validator(mode="after")
    def _one_limit(self) -> "ChatRequest":
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("give max_completion_tokens or max_tokens, not both")
        return self

    def limit(self) -> int | None:
        """The reply's token limit the request asks for."""
        return self.max_completion_tokens or self.max_tokens


class CompletionRequest(_Request):
    """POST /v1/completions."""

    prompt: str | list[int]
    logprobs: Literal[0] | None = None  # 0: each token's own log-prob, without alternatives

    def limit(self) -> int | None:
        """The reply's token limit the request asks for."""
        return self.max_tokens


class FeedbackRequest(BaseModel):
    """POST /feedback (serve mode): the reward of one episode's calls."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(min_length=1)  # the response ids (chatcmpl-..., cmpl-...), in the order they were made
    reward: float
    group: str | None = None  # the rollouts a group advantage compares (GRPO); default: the first id


def parse(kind: type[BaseModel], body: object) -> BaseModel:
    """The request, or an ApiError naming the first field that is wrong (and what the endpoint takes)."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body is not a JSON object")
    try:
        return kind.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        param = ".".join(str(p) for p in error["loc"]) or None
        if error["type"] == "extra_forbidden":
            fields = ", ".join(kind.model_fields)
            raise ApiError(400, f"{param} is not supported by trinity's endpoint (it takes: {fields})", param) from None
        if param == "stream":
            raise ApiError(400, "stream: true is not supported by trinity's endpoint; ask without it", param) from None
        raise ApiError(400, f"{param}: {error['msg']}" if param else error["msg"], param) from None
