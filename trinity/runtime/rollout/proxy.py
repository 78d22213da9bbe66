"""Serve mode's proxy: one OpenAI-compatible endpoint in front of the serve run's engines, as Trinity-RFT's
explorer/proxy/ (app.py, service.py, recorder.py) runs one on `explorer.listen_address:proxy_port`.

- Requests (POST /v1/chat/completions, /v1/completions; GET /v1/models) go to the engines in turn (round robin over
  those that answer their health check and are not taking new weights), with the request's own headers; an engine
  that refuses the connection is marked down and the request goes to the next one.
- Every `explorer.service_status_check_interval` seconds the proxy asks each engine's /health (which gives its
  weight version): one that does not answer gets no requests until it does. While fewer than
  `explorer.min_running_model_num` engines answer, the proxy answers 503 (also before the first engines answer).
- New weights reach the engines a few at a time (`withdraw`, `drained`, `restore`, driven by the serve loop): the
  proxy keeps `min_running_model_num` engines serving while the others finish their requests and load.
- Each forwarded call is kept in the SQLite database `explorer.db_url` (proxy_records.py), with its token ids and
  log-probs (the proxy asks the engine for them, and hands the client only what it asked for); POST /feedback
  rewards calls by their response ids there and makes them experiences, which the serve loop stores a batch at a
  time. GET /health is the proxy's own; GET /metrics counts requests per engine and the calls recorded.

The proxy runs in the driver, in a thread of its own with its own event loop (uvicorn), beside the serve loop.
"""

import asyncio
import hmac
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from ...config.schema.explorer import NO_API_KEY
from . import episodes
from .history import RecordedCall
from .openai_api import PROXY_HEADER
from .openai_requests import ApiError
from .proxy_records import CallRecords

# headers that belong to one connection, not to the request (RFC 9110 7.6.1), and those httpx sets itself
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
}
HEALTH_TIMEOUT_S = 10.0  # an engine that does not answer /health within this is down until it does


@dataclass
class EngineState:
    """What the proxy knows of one engine (one OpenAI endpoint)."""

    index: int
    url: str  # …/v1
    healthy: bool = False
    serving: bool = True  # False while it takes new weights
    in_flight: int = 0
    requests: int = 0
    weight_version: int | None = None
    problem: str = "not checked yet"

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")


class Feedback(BaseModel):
    """POST /feedback at the proxy: trinity's body ({ids, reward, group}), or Trinity-RFT's ({msg_ids, reward,
    task_id, run_id})."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(min_length=1, validation_alias=AliasChoices("ids", "msg_ids"))
    reward: float
    group: str | None = Field(None, validation_alias=AliasChoices("group", "task_id"))
    run_id: int = Field(0, ge=0)


class Proxy:
    """The proxy in front of engines `urls` (…/v1 each): `start` it, `stop` it; the serve loop takes its
    experiences (`take_experiences`) and moves weights through it (`withdraw`, `drained`, `restore`)."""

    def __init__(
        self,
        urls: list[str],
        host: str,
        port: int,
        records: CallRecords,
        *,
        min_running: int = 1,
        check_interval_s: float = 60,
        api_key: str = NO_API_KEY,
        timeout_s: float = 1800,
        public_host: str | None = None,
    ) -> None:
        self.engines = [EngineState(i, u) for i, u in enumerate(urls)]
        self.host, self.port, self.records = host, port, records
        self.min_running, self.check_interval_s = min_running, check_interval_s
        self.api_key, self.timeout_s = api_key, timeout_s
        self.public_host = public_host or host
        self.url: str | None = None
        self.rewarded: list = []  # experiences /feedback made, until the serve loop takes them
        self.accepting = True  # False once the serve loop took its last rewards
        self._lock = threading.Lock()
        self._next = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._failure: BaseException | None = None

    # --- starting and stopping (the driver's thread) ----------------------------------------------------------

    def start(self, timeout_s: float = 60) -> str:
        """Listen, check the engines once, and serve; returns the proxy's base URL (…/v1)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise OSError(
                f"the serve proxy cannot listen on {self.host}:{self.port}: {exc.strerror} (explorer.listen_address, "
                "explorer.proxy_port)"
            ) from None
        bound = sock.getsockname()[1]
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(sock, ready), name="serve-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(timeout_s) or self._failure is not None:
            self.stop()
            raise RuntimeError(f"the serve proxy did not start: {self._failure}")
        host = self.public_host
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{bound}/v1"
        return self.url

    def stop(self) -> None:
        """Stop serving (the records stay in the database)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.records.close()

    def _run(self, sock: socket.socket, ready: threading.Event) -> None:
        try:
            asyncio.run(self._main(sock, ready))
        except BaseException as exc:  # noqa: BLE001 - start() reports it
            self._failure = exc
            ready.set()

    async def _main(self, sock: socket.socket, ready: threading.Event) -> None:
        from contextlib import contextmanager

        import httpx
        import uvicorn

        class Server(uvicorn.Server):
            @contextmanager
            def capture_signals(self):  # the driver keeps its own signal handlers
                yield

        self._loop = asyncio.get_running_loop()
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s, connect=10.0), limits=limits) as client:
            self._client = client
            await self._check_all()
            checks = asyncio.create_task(self._check_loop())
            self._server = Server(uvicorn.Config(self.app(), log_level="warning", lifespan="off", access_log=False))
            serving = asyncio.create_task(self._server.serve(sockets=[sock]))
            while not self._server.started and not serving.done():
                await asyncio.sleep(0.01)
            ready.set()
            try:
                await serving
            finally:
                checks.cancel()

    # --- engines' health -----------------------------------------------------------------------------------

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_s)
            await self._check_all()

    async def _check_all(self) -> None:
        await asyncio.gather(*(self._check(e) for e in self.engines))

    async def _check(self, engine: EngineState) -> None:
        try:
            answer = await self._client.get(f"{engine.root}/health", timeout=HEALTH_TIMEOUT_S)
            if answer.status_code != 200:
                raise RuntimeError(f"/health answered {answer.status_code}")
            version = answer.json().get("weight_version")
        except Exception as exc:  # down, or answering nonsense: no requests until it answers again
            with self._lock:
                engine.healthy, engine.problem = False, f"{type(exc).__name__}: {exc}"
            return
        with self._lock:
            engine.healthy, engine.problem, engine.weight_version = True, "", version

    def _answering(self) -> list[EngineState]:
        return [e for e in self.engines if e.healthy]

    def _pick(self, tried: set[int]) -> EngineState:
        """The next engine in turn that answers and serves (not one of `tried`), its request counted."""
        with self._lock:
            answering = self._answering()
            if len(answering) < self.min_running:
                down = "; ".join(f"engine {e.index}: {e.problem}" for e in self.engines if not e.healthy)
                raise ApiError(
                    503,
                    f"{len(answering)} of {len(self.engines)} engines answer their health check, fewer than "
                    f"explorer.min_running_model_num={self.min_running} ({down}); try again shortly",
                )
            n = len(self.engines)
            for step in range(n):
                engine = self.engines[(self._next + step) % n]
                if engine.healthy and engine.serving and engine.index not in tried:
                    self._next = (engine.index + 1) % n
                    engine.in_flight += 1
                    engine.requests += 1
                    return engine
        raise ApiError(503, "no engine is free to answer: they are taking new weights or down; try again shortly")

    def _done(self, engine: EngineState) -> None:
        with self._lock:
            engine.in_flight -= 1

    # --- weights, a few engines at a time (the serve loop's thread) -------------------------------------------

    def withdraw(self, pending: list[int]) -> list[int]:
        """Take engines of `pending` out of turn (they finish what they answer and get no new requests) while
        `min_running_model_num` answering engines keep serving; returns those taken ([]: none can be spared). An
        engine that does not answer is taken at once."""
        with self._lock:
            serving = [e.index for e in self.engines if e.healthy and e.serving]
            spare = len(serving) - self.min_running
            taken = [i for i in pending if not self.engines[i].healthy]
            for i in pending:
                if i in serving and spare > 0:
                    taken.append(i)
                    spare -= 1
            for i in taken:
                self.engines[i].serving = False
            return sorted(taken)

    def drained(self, taken: list[int], timeout_s: float) -> bool:
        """Wait until engines `taken` answered every request the proxy sent them (at most `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if all(self.engines[i].in_flight == 0 for i in taken):
                    return True
            time.sleep(0.05)
        return False

    def restore(self, taken: list[int], version: int) -> None:
        """Engines `taken` serve again, holding weight version `version`."""
        with self._lock:
            for i in taken:
                self.engines[i].serving, self.engines[i].weight_version = True, version

    def take_experiences(self, final: bool = False) -> list:
        """The experiences /feedback made since the last call; `final`: /feedback refuses what would come after."""
        with self._lock:
            self.accepting = not final
            made, self.rewarded = self.rewarded, []
        return made

    def metrics(self) -> dict:
        """Requests per engine and the calls recorded (GET /metrics)."""
        with self._lock:
            engines = [
                {
                    "engine": e.index,
                    "url": e.url,
                    "healthy": e.healthy,
                    "serving": e.serving,
                    "requests": e.requests,
                    "in_flight": e.in_flight,
                    "weight_version": e.weight_version,
                    "problem": e.problem,
                }
                for e in self.engines
            ]
        return {"engines": engines, **self.records.counts()}

    # --- the application ----------------------------------------------------------------------------------

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.routing import Route

        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._forward, methods=["POST"]),
                Route("/v1/completions", self._forward, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/feedback", self._feedback, methods=["POST"]),
                Route("/health", self._health, methods=["GET"]),
                Route("/metrics", self._metrics, methods=["GET"]),
            ]
        )

    def _authorize(self, headers: Any) -> None:
        given = headers.get("authorization", "")
        if self.api_key != NO_API_KEY and not hmac.compare_digest(given.encode(), f"Bearer {self.api_key}".encode()):
            raise ApiError(401, "a missing or wrong API key: send explorer.rollout_model.api_key as the Bearer token")

    @staticmethod
    def _error(exc: ApiError) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse(exc.body(), status_code=exc.status)

    async def _health(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        with self._lock:
            answering = len(self._answering())
        ok = answering >= self.min_running
        body = {"status": "ok" if ok else "unavailable", "engines": len(self.engines), "answering": answering}
        return JSONResponse(body, status_code=200 if ok else 503)

    async def _metrics(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            self._authorize(request.headers)
        except ApiError as exc:
            return self._error(exc)
        return JSONResponse(self.metrics())

    async def _models(self, request: Any) -> Any:
        from starlette.responses import Response

        try:
            self._authorize(request.headers)
            answer, engine = await self._send(request, "GET", "/models", None)
        except ApiError as exc:
            return self._error(exc)
        self._done(engine)
        return Response(answer.content, status_code=answer.status_code, media_type="application/json")

    async def _send(self, request: Any, method: str, path: str, body: object) -> tuple[Any, EngineState]:
        """Send the request to the next engine in turn (the next one again when an engine refuses the connection);
        returns the answer and the engine, whose request is still counted in flight."""
        import httpx

        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers[PROXY_HEADER] = "1"
        tried: set[int] = set()
        while True:
            engine = self._pick(tried)
            try:
                answer = await self._client.request(method, engine.url + path, json=body, headers=headers)
                return answer, engine
            except httpx.ConnectError as exc:  # nothing reached it: mark it down, try the next
                self._done(engine)
                with self._lock:
                    engine.healthy, engine.problem = False, f"ConnectError: {exc}"
                tried.add(engine.index)
            except httpx.TimeoutException:
                self._done(engine)
                raise ApiError(
                    503, f"engine {engine.index} did not answer within {self.timeout_s:g} s (explorer.max_timeout)"
                ) from None
            except httpx.HTTPError as exc:
                self._done(engine)
                raise ApiError(503, f"engine {engine.index} failed: {type(exc).__name__}: {exc}") from None

    async def _forward(self, request: Any) -> Any:
        from starlette.responses import JSONResponse, Response

        path, started = request.url.path, time.perf_counter()
        try:
            self._authorize(request.headers)
            try:
                body = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ApiError(400, f"the request body is not JSON: {exc}") from None
            if not isinstance(body, dict):
                raise ApiError(400, "the request body is not a JSON object")
            answer, engine = await self._send(request, "POST", path.removeprefix("/v1"), _asking_ids(path, body))
        except ApiError as exc:
            return self._error(exc)
        try:
            try:
                reply = answer.json()
            except ValueError:
                reply = None
            calls = _calls(reply, engine) if answer.status_code == 200 and isinstance(reply, dict) else None
            shown = _as_asked(path, body, reply) if calls is not None else reply
            recorded = shown if shown is not None else answer.text
            self.records.record(
                path,
                engine.index,
                engine.url,
                answer.status_code,
                time.perf_counter() - started,
                dict(request.headers),
                body,
                recorded,
                calls,
            )
        finally:
            self._done(engine)
        if shown is None:
            return Response(
                answer.content, status_code=answer.status_code, media_type=answer.headers.get("content-type")
            )
        return JSONResponse(shown, status_code=answer.status_code)

    async def _feedback(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            self._authorize(request.headers)
            if not self.accepting:
                raise ApiError(
                    503, "the serve run is stopping: its last rewards were stored, and this one would be lost"
                )
            try:
                body = await request.json()
                feedback = Feedback.model_validate(body)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ApiError(400, f"the request body is not JSON: {exc}") from None
            except ValidationError as exc:
                error = exc.errors()[0]
                param = ".".join(str(p) for p in error["loc"]) or None
                raise ApiError(400, f"{param}: {error['msg']}" if param else error["msg"], param) from None
            group = feedback.group or feedback.ids[0]
            calls, missing = self.records.reward(feedback.ids, feedback.reward, group)
            if missing:
                raise ApiError(
                    404,
                    f"no call {missing[0]!r} waits for a reward at the proxy: each call it forwarded is rewarded once "
                    "(a call made at an engine's own endpoint is rewarded there)",
                    "ids",
                )
            made = episodes.experiences(calls, feedback.reward, group, feedback.ids[0])
            for exp in made:
                exp.run = feedback.run_id
            with self._lock:
                if not self.accepting:  # the run stopped while this was written: say so rather than lose it silently
                    raise ApiError(503, "the serve run is stopping: its last rewards were stored, and this one is lost")
                self.rewarded += made
        except ApiError as exc:
            return self._error(exc)
        return JSONResponse({"experiences": len(made)})


def _asking_ids(path: str, body: dict) -> dict:
    """The request as sent to the engine: asking for the token ids and log-probs an experience needs."""
    sent = dict(body)
    sent["return_token_ids"] = True
    if path.endswith("/chat/completions"):
        sent["logprobs"] = True
    elif body.get("logprobs") is None:
        sent["logprobs"] = 0
    return sent


def _as_asked(path: str, body: dict, reply: dict) -> dict:
    """The engine's answer without the ids and log-probs the client did not ask for."""
    shown = json.loads(json.dumps(reply))
    if not body.get("return_token_ids"):
        shown.pop("prompt_token_ids", None)
        for choice in shown.get("choices", []):
            choice.pop("token_ids", None)
    chat = path.endswith("/chat/completions")
    if (chat and not body.get("logprobs")) or (not chat and body.get("logprobs") is None):
        for choice in shown.get("choices", []):
            if chat:
                choice.pop("logprobs", None)
            else:
                choice["logprobs"] = None
    return shown


def _calls(reply: dict, engine: EngineState) -> list[RecordedCall] | None:
    """The answer's choices as the engine generated them (None: it did not give the ids, not trinity's engine)."""
    prompt = reply.get("prompt_token_ids")
    if not isinstance(prompt, list):
        return None
    version = reply.get("weight_version", engine.weight_version or 0)
    calls = []
    for choice in reply.get("choices", []):
        ids, logprobs = choice.get("token_ids"), choice.get("logprobs") or {}
        if not isinstance(ids, list):
            return None
        if "content" in logprobs:  # chat
            values = [t["logprob"] for t in logprobs["content"] or []]
            text = (choice.get("message") or {}).get("content") or ""
        else:
            values, text = list(logprobs.get("token_logprobs") or []), choice.get("text", "")
        if len(values) != len(ids):  # not what trinity's engine answers: kept, not rewardable
            return None
        calls.append(RecordedCall(reply["id"], prompt, ids, values, text, version, choice.get("finish_reason", "")))
    return calls


DEFAULT_DB = "proxy_history.db"  # in the run directory, where Trinity-RFT's is in the buffer's cache folder
WILDCARD = ("0.0.0.0", "::", "")


def db_path(config: Any, run_dir: Any) -> str:
    """Where explorer.db_url keeps the records: a relative path is in the run directory, null is DEFAULT_DB there."""
    from pathlib import Path

    url = config.explorer.db_url
    if url is None:
        return str(Path(run_dir) / DEFAULT_DB)
    path = url.removeprefix("sqlite:///")
    if path == ":memory:":
        return path
    return str(path if Path(path).is_absolute() else Path(run_dir) / path)


def start(config: Any, urls: list[str], run_dir: Any, node_address: str) -> Proxy:
    """The serve run's proxy in front of engines `urls`, started as its config says; `node_address` is this node's
    address, named in the proxy's URL when it listens on every interface."""
    explorer = config.explorer
    host = explorer.listen_address
    proxy = Proxy(
        urls,
        host,
        explorer.proxy_port,
        CallRecords(db_path(config, run_dir)),
        min_running=explorer.min_running_model_num,
        check_interval_s=explorer.service_status_check_interval,
        api_key=explorer.rollout_model.api_key,
        timeout_s=explorer.max_timeout,
        public_host=node_address if host in WILDCARD else host,
    )
    proxy.start()
    return proxy
