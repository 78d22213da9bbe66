"""An engine's OpenAI-compatible endpoint (`explorer.rollout_model.enable_openai_api`): /v1/chat/completions,
/v1/completions and /v1/models over the engine's own `generate`, on the address Ray gave its actor.

It runs in the engine actor's event loop, so its requests are batched with the explorer's and see one weight version
each, as every other request does; the same code serves both engine types. Chat requests are rendered by the run's
chat template and tools (`explorer.rollout_model.chat_template`), and tool calls in a reply are parsed in
`tool_call_parser`'s format into `tool_calls`. Responses carry OpenAI's fields, plus vLLM's `prompt_token_ids` and
per-choice `token_ids` when a request asks (`return_token_ids`); every call made in a session (history.SESSION_HEADER)
is also kept for its workflow with the ids and log-probs the engine produced (history.History).
"""

import asyncio
import hmac
import json
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import contextmanager
from typing import Any

from ...config import modes
from ...config.schema import RunConfig
from ...config.schema.explorer import NO_API_KEY
from ..data.prompts import render_chat
from . import episodes
from .history import SAMPLING_HEADER, SESSION_HEADER, History, RecordedCall
from .openai_messages import for_template, reply_message
from .openai_requests import ApiError, ChatRequest, CompletionRequest, FeedbackRequest, parse
from .samples import Sample, Sampling

PROXY_HEADER = "X-Trinity-Proxy"  # a call serve mode's proxy forwards (proxy.py): the proxy keeps it for /feedback


class OpenAIServer:
    """The endpoint of one engine: `start` it in the engine's event loop; `history` keeps its sessions' calls."""

    def __init__(self, engine: Any, tokenizer: Any) -> None:
        self.engine, self.tokenizer = engine, tokenizer
        self.history = History()
        self.rewarded: list = []  # serve mode: experiences of the calls /feedback rewarded, until the stage takes them
        self.accepting = True  # serve mode: False once the stage took its last rewards (the run stops)
        self._server: Any = None
        self._task: asyncio.Task | None = None

    @property
    def config(self) -> RunConfig:
        """The engine's config (a kept engine's is the current stage's)."""
        return self.engine.config

    @property
    def model_name(self) -> str:
        """The name requests give the model: its path in the run config (explorer.rollout_model.model_path)."""
        return self.config.explorer.rollout_model.model_path

    async def start(self, host: str, port: int) -> str:
        """Listen on host:port (0: a free one); returns the endpoint's base URL (…/v1)."""
        import uvicorn

        class Server(uvicorn.Server):
            @contextmanager
            def capture_signals(self):  # the actor's process keeps its own signal handlers
                yield

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise OSError(
                f"the OpenAI endpoint cannot listen on {host}:{port}: {exc.strerror} (explorer.rollout_model.base_port)"
            ) from None
        self._server = Server(uvicorn.Config(self.app(), log_level="warning", lifespan="off", access_log=False))
        self._task = task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if task.done():
                task.result()  # it stopped before it started: its error
            await asyncio.sleep(0.01)
        bound = sock.getsockname()[1]
        return f"http://{f'[{host}]' if family == socket.AF_INET6 else host}:{bound}/v1"

    async def stop(self) -> None:
        """Stop listening (the calls kept in `history` stay)."""
        self._server.should_exit = True
        while self._server.started and not self._task.done():
            await asyncio.sleep(0.01)

    def app(self) -> Any:
        """The ASGI application: the three OpenAI routes and /health."""
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route("/v1/models", self._handler(self.models), methods=["GET"]),
                Route("/v1/chat/completions", self._handler(self.chat), methods=["POST"]),
                Route("/v1/completions", self._handler(self.completions), methods=["POST"]),
                Route("/health", self._handler(lambda body, headers: self._health()), methods=["GET"]),
                Route("/feedback", self._handler(self.feedback), methods=["POST"]),
            ]
        )

    def _handler(self, answer: Callable[[object, Any], dict | Awaitable[dict]]) -> Callable:
        from starlette.responses import JSONResponse

        async def handle(request) -> JSONResponse:
            try:
                if request.url.path != "/health":  # a liveness probe needs no key
                    self._authorize(request.headers)
                body = await _json(request) if request.method == "POST" else None
                result = answer(body, request.headers)
                return JSONResponse(await result if asyncio.iscoroutine(result) else result)
            except ApiError as exc:
                return JSONResponse(exc.body(), status_code=exc.status)
            except Exception as exc:  # the engine's own error (it died, it is asleep): the client gets it by name
                self.engine.log.exception("OpenAI endpoint: %s failed", request.url.path)
                error = ApiError(500, f"{type(exc).__name__}: {exc}")
                return JSONResponse(error.body(), status_code=error.status)

        return handle

    async def _health(self) -> dict:
        return {"status": "ok", "weight_version": self.engine.weight_version()}

    def _authorize(self, headers: Any) -> None:
        key = self.config.explorer.rollout_model.api_key
        given = headers.get("authorization", "")
        if key != NO_API_KEY and not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            raise ApiError(401, "a missing or wrong API key: send explorer.rollout_model.api_key as the Bearer token")

    def models(self, body: None, headers: Any) -> dict:
        """GET /v1/models: the one model this engine serves."""
        limit = self.config.explorer.rollout_model.max_model_len
        entry = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "trinity", "max_model_len": limit}
        return {"object": "list", "data": [entry]}

    def _check_model(self, name: str) -> None:
        if name != self.model_name:
            raise ApiError(
                404,
                f"the model {name!r} does not exist; this endpoint serves {self.model_name!r} (GET /v1/models)",
                "model",
            )

    async def chat(self, body: object, headers: Any) -> dict:
        """POST /v1/chat/completions."""
        request = parse(ChatRequest, body)
        self._check_model(request.model)
        calls = self._tool_format(request)
        prompt_ids = self._ids(self._render(request))
        version, samples = await self._generate(prompt_ids, request, headers)
        reply_id = f"chatcmpl-{uuid.uuid4().hex}"
        choices = [self._chat_choice(i, s, request, calls) for i, s in enumerate(samples)]
        self._record(headers, reply_id, prompt_ids, samples, version, [c["finish_reason"] for c in choices])
        return self._response(reply_id, "chat.completion", request, prompt_ids, samples, choices, version)

    async def completions(self, body: object, headers: Any) -> dict:
        """POST /v1/completions."""
        request = parse(CompletionRequest, body)
        self._check_model(request.model)
        prompt_ids = self._prompt_ids(request.prompt)
        version, samples = await self._generate(prompt_ids, request, headers)
        reply_id = f"cmpl-{uuid.uuid4().hex}"
        choices = [self._completion_choice(i, s, request) for i, s in enumerate(samples)]
        self._record(headers, reply_id, prompt_ids, samples, version, [c["finish_reason"] for c in choices])
        return self._response(reply_id, "text_completion", request, prompt_ids, samples, choices, version)

    # --- prompts -----------------------------------------------------------------------------------------

    def _tool_format(self, request: ChatRequest) -> str | None:
        """The tool-call format replies are parsed in, or None when the request has no tools to call."""
        if not request.tools or request.tool_choice == "none":
            return None
        rollout = self.config.explorer.rollout_model
        if rollout.tool_call_parser is None:
            raise ApiError(
                400,
                "a request with tools needs a tool-call format to read calls from replies: set "
                "explorer.rollout_model.tool_call_parser (hermes, brackets), or send tool_choice: none",
                "tools",
            )
        if not rollout.enable_auto_tool_choice:  # vLLM's 400 without --enable-auto-tool-choice
            raise ApiError(
                400,
                'tool_choice "auto" (a request with tools asks it unless it says none) needs '
                "explorer.rollout_model.enable_auto_tool_choice: true",
                "tool_choice",
            )
        return rollout.tool_call_parser

    def _render(self, request: ChatRequest) -> str:
        rollout = self.config.explorer.rollout_model
        try:
            messages = [for_template(m) for m in request.messages]
        except (AttributeError, TypeError):
            raise ApiError(
                400, "a message's tool_calls are not OpenAI's [{id, type, function: {name, arguments}}]", "messages"
            ) from None
        try:
            return render_chat(
                self.tokenizer, messages, rollout.chat_template, bool(rollout.enable_thinking), request.tools, True
            )
        except (
            Exception
        ) as exc:  # the template's own error (a role it does not take, a raise_exception) is the request's
            raise ApiError(400, f"the chat template cannot render these messages: {exc}", "messages") from None

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _prompt_ids(self, prompt: str | list[int]) -> list[int]:
        if isinstance(prompt, str):
            return self._ids(prompt)
        size = len(self.tokenizer)
        bad = [t for t in prompt if not 0 <= t < size]
        if bad or not prompt:
            raise ApiError(
                400, f"prompt token ids must be non-empty and in [0, {size}); got {bad[:5] or prompt}", "prompt"
            )
        return prompt

    # --- generating --------------------------------------------------------------------------------------

    async def _generate(self, prompt_ids: list[int], request: Any, headers: Any) -> tuple[int, list[Sample]]:
        sampling = self._sampling(request, len(prompt_ids), self._defaults(headers))
        # explorer.rollout_model.enable_log_requests, as vLLM's server logs each request it takes
        self.engine.requests.info(
            "OpenAI request for %s: %d prompt tokens, n=%d, %s", request.model, len(prompt_ids), request.n, sampling
        )
        return await self.engine.generate(prompt_ids, request.n, sampling)

    def _defaults(self, headers: Any) -> Sampling:
        """What a request leaves out: its session's sampling (a workflow's taskset), else the engines' own defaults
        (Trinity-RFT's vLLM engine's: model.temperature, top_p, top_k; explorer.rollout_model's token limits)."""
        given = headers.get(SAMPLING_HEADER.lower())
        if given:
            from pydantic import TypeAdapter, ValidationError

            try:
                return TypeAdapter(Sampling).validate_json(given)
            except ValidationError as exc:
                raise ApiError(400, f"the {SAMPLING_HEADER} header is not trinity's sampling JSON: {exc}") from None
        model, rollout = self.config.model, self.config.explorer.rollout_model
        return Sampling(
            temperature=model.temperature,
            top_p=model.top_p,
            top_k=model.top_k,
            max_tokens=rollout.max_response_tokens or Sampling.max_tokens,  # the explorer's default too
            min_tokens=rollout.min_response_tokens or 0,
            repetition_penalty=rollout.repetition_penalty or 1.0,
        )

    def _sampling(self, request: Any, prompt_tokens: int, default: Sampling) -> Sampling:
        """The request's sampling arguments, `default`'s where it gives none; a reply fits the context."""
        limit = self.config.explorer.rollout_model.max_model_len
        room = limit - prompt_tokens if limit else None
        if room is not None and room <= 0:
            raise ApiError(
                400,
                f"the prompt is {prompt_tokens} tokens and the context (max_model_len) holds {limit} with the reply: "
                "shorten the conversation",
                "messages",
            )
        asked = request.limit()
        if asked is not None and room is not None and asked > room:
            raise ApiError(
                400,
                f"{asked} reply tokens after the prompt's {prompt_tokens} pass the context (max_model_len={limit}); "
                f"ask for at most {room}",
                "max_tokens",
            )
        # a default limit is cut to the room left, as a workflow's conversation cuts it
        max_tokens = asked or (default.max_tokens if room is None else min(default.max_tokens, room))
        if request.min_tokens is not None and request.min_tokens > max_tokens:
            raise ApiError(
                400, f"min_tokens={request.min_tokens} is above the reply's limit, {max_tokens}", "min_tokens"
            )
        return Sampling(
            temperature=_given(request.temperature, default.temperature),
            top_p=_given(request.top_p, default.top_p),
            top_k=default.top_k if request.top_k is None else (request.top_k or -1),
            max_tokens=max_tokens,
            min_tokens=min(_given(request.min_tokens, default.min_tokens), max_tokens),
            repetition_penalty=_given(request.repetition_penalty, default.repetition_penalty),
        )

    # --- answering ---------------------------------------------------------------------------------------

    def _finish(self, sample: Sample) -> str:
        return "stop" if sample.stopped else "length"

    def _chat_choice(self, index: int, sample: Sample, request: ChatRequest, call_format: str | None) -> dict:
        rollout = self.config.explorer.rollout_model
        thinking = rollout.enable_thinking is not False  # a chat template thinks unless told not to (vLLM's default)
        message = reply_message(sample.text, call_format, request.tools or [], rollout.reasoning_parser, thinking)
        finish = "tool_calls" if message.get("tool_calls") else self._finish(sample)
        choice = {"index": index, "message": message, "finish_reason": finish}
        if request.logprobs:
            tokens = self.tokenizer.convert_ids_to_tokens(sample.response_ids)
            choice["logprobs"] = {
                "content": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
                    for t, lp in zip(tokens, sample.logprobs)
                ]
            }
        if request.return_token_ids:
            choice["token_ids"] = sample.response_ids
        return choice

    def _completion_choice(self, index: int, sample: Sample, request: CompletionRequest) -> dict:
        choice = {"index": index, "text": sample.text, "finish_reason": self._finish(sample), "logprobs": None}
        if request.logprobs is not None:
            tokens = self.tokenizer.convert_ids_to_tokens(sample.response_ids)
            choice["logprobs"] = {"tokens": tokens, "token_logprobs": sample.logprobs, "top_logprobs": None}
        if request.return_token_ids:
            choice["token_ids"] = sample.response_ids
        return choice

    def _response(
        self,
        reply_id: str,
        kind: str,
        request: Any,
        prompt_ids: list[int],
        samples: list[Sample],
        choices: list[dict],
        version: int,
    ) -> dict:
        generated = sum(len(s.response_ids) for s in samples)
        usage = {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": generated,
            "total_tokens": len(prompt_ids) + generated,
        }
        out = {
            "id": reply_id,
            "object": kind,
            "created": int(time.time()),
            "model": request.model,
            "choices": choices,
            "usage": usage,
            "weight_version": version,
        }
        if request.return_token_ids:
            out["prompt_token_ids"] = prompt_ids
        return out

    def feedback(self, body: object, headers: Any) -> dict:
        """POST /feedback (serve mode): {"ids": [the response ids of one episode's calls, in order], "reward": r,
        "group": g (default: the first id)} makes those calls experiences (episodes.py) for the buffer; each call is
        rewarded once."""
        if not modes.mode(self.config.mode).serves:
            raise ApiError(404, "/feedback is serve mode's (mode: serve); in a run, a workflow scores its own calls")
        if not self.accepting:
            raise ApiError(503, "the serve run is stopping: its last rewards were stored, and this one would be lost")
        request = parse(FeedbackRequest, body)
        missing = [i for i in request.ids if not self.history.has(i)]
        if missing:
            raise ApiError(
                404,
                f"no call {missing[0]!r} waits for a reward here: each call is rewarded once, at the endpoint that "
                "answered it",
                "ids",
            )
        calls = [call for i in request.ids for call in self.history.take(i)]
        made = episodes.experiences(calls, request.reward, request.group or request.ids[0], request.ids[0])
        self.rewarded += made
        return {"experiences": len(made)}

    def _record(
        self,
        headers: Any,
        reply_id: str,
        prompt_ids: list[int],
        samples: list[Sample],
        version: int,
        finishes: list[str],
    ) -> None:
        # serve mode: every call, by its own id, for /feedback (the proxy keeps the calls it forwards)
        serves = modes.mode(self.config.mode).serves
        if serves and headers.get(PROXY_HEADER.lower()):
            return
        session = reply_id if serves else headers.get(SESSION_HEADER.lower())
        if session:
            self.history.record(
                session,
                [
                    RecordedCall(reply_id, list(prompt_ids), s.response_ids, s.logprobs, s.text, version, f)
                    for s, f in zip(samples, finishes)
                ],
            )


async def _json(request: Any) -> object:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not JSON: {exc}") from None


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value
