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
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from ...config.schema.explorer import NO_API_KEY
from . import episodes
from .openai_api import PROXY_HEADER
from .openai_requests import ApiError
from .proxy_engines import EngineState, EngineTurns
from .proxy_records import CallRecords
from .proxy_replies import HOP_BY_HOP, as_asked, asking_ids, recorded_calls


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
        self.turns = EngineTurns(urls, min_running)
        self.engines = self.turns.engines
        self.host, self.port, self.records = host, port, records
        self.check_interval_s = check_interval_s
        self.api_key, self.timeout_s = api_key, timeout_s
        self.public_host = public_host or host
        self.url: str | None = None
        self.rewarded: list = []  # experiences /feedback made, until the serve loop takes them
        self.accepting = True  # False once the serve loop took its last rewards
        self._lock = threading.Lock()  # over `rewarded` and `accepting` (the engines have their own: self.turns)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._failure: BaseException | None = None

    @property
    def min_running(self) -> int:
        """explorer.min_running_model_num: fewer engines answering than this, and the proxy answers 503."""
        return self.turns.min_running

    @min_running.setter
    def min_running(self, value: int) -> None:
        with self.turns.lock:
            self.turns.min_running = value

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
            await self.turns.check_all(client)
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

    async def _check_loop(self) -> None:
        """Every check_interval_s: each engine's health (EngineTurns.check_all)."""
        while True:
            await asyncio.sleep(self.check_interval_s)
            await self.turns.check_all(self._client)

    # --- weights, a few engines at a time (the serve loop's thread): the engines' turns (proxy_engines.py) ----

    def withdraw(self, pending: list[int]) -> list[int]:
        """EngineTurns.withdraw: engines of `pending` out of turn, as many as can be spared; returns those taken."""
        return self.turns.withdraw(pending)

    def drained(self, taken: list[int], timeout_s: float) -> bool:
        """EngineTurns.drained: whether engines `taken` answered all they were sent, within `timeout_s`."""
        return self.turns.drained(taken, timeout_s)

    def restore(self, taken: list[int], version: int) -> None:
        """EngineTurns.restore: engines `taken` serve again, holding weight version `version`."""
        self.turns.restore(taken, version)

    def take_experiences(self, final: bool = False) -> list:
        """The experiences /feedback made since the last call; `final`: /feedback refuses what would come after."""
        with self._lock:
            self.accepting = not final
            made, self.rewarded = self.rewarded, []
        return made

    def metrics(self) -> dict:
        """Requests per engine and the calls recorded (GET /metrics)."""
        return {"engines": self.turns.table(), **self.records.counts()}

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

        answering = self.turns.answering()
        ok = answering >= self.turns.min_running
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
        self.turns.done(engine)
        return Response(answer.content, status_code=answer.status_code, media_type="application/json")

    async def _send(self, request: Any, method: str, path: str, body: object) -> tuple[Any, EngineState]:
        """Send the request to the next engine in turn (the next one again when an engine refuses the connection);
        returns the answer and the engine, whose request is still counted in flight."""
        import httpx

        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        headers[PROXY_HEADER] = "1"
        tried: set[int] = set()
        while True:
            engine = self.turns.pick(tried)
            try:
                answer = await self._client.request(method, engine.url + path, json=body, headers=headers)
                return answer, engine
            except httpx.ConnectError as exc:  # nothing reached it: mark it down, try the next
                self.turns.done(engine)
                self.turns.down(engine, f"ConnectError: {exc}")
                tried.add(engine.index)
            except httpx.TimeoutException:
                self.turns.done(engine)
                raise ApiError(
                    503, f"engine {engine.index} did not answer within {self.timeout_s:g} s (explorer.max_timeout)"
                ) from None
            except httpx.HTTPError as exc:
                self.turns.done(engine)
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
            answer, engine = await self._send(request, "POST", path.removeprefix("/v1"), asking_ids(path, body))
        except ApiError as exc:
            return self._error(exc)
        try:
            try:
                reply = answer.json()
            except ValueError:
                reply = None
            calls = recorded_calls(reply, engine) if answer.status_code == 200 and isinstance(reply, dict) else None
            shown = as_asked(path, body, reply) if calls is not None else reply
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
            self.turns.done(engine)
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
