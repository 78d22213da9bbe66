"""An OpenAI-compatible judge stand-in on loopback (127.0.0.1 only), for trajectory_accuracy_grader_reward's tests and
the external (API) model's (model.external_model): `POST /v1/chat/completions` answers with what `answer(request)`
returns (a reply text, or an (HTTP status, body) pair), after `delay` seconds, as `n` choices (each its own call of
`answer`; `max_choices` caps them, as an API that gives fewer); `GET /v1/models` lists `models` (None: 404); every
request is kept. The client that talks to it is the real `openai` one."""

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[[dict], "str | tuple[int, dict]"]


def grade_by_answer(right: Callable[[str], bool]) -> Answer:
    """A judge that grades 3 when `right(the conversation's last assistant turn)`, else 1, in JSON."""

    def answer(request: dict) -> str:
        rendered = request["messages"][-1]["content"]
        last = rendered.split("<trajectory>")[1].split("</trajectory>")[0].strip().split("\n\n")[-1]
        reply = last.removeprefix("[assistant]").strip()
        return json.dumps({"reason": "checked", "score": 3 if right(reply) else 1})

    return answer


@contextmanager
def judge_standin(
    answer: Answer, delay: float = 0.0, models: list[str] | None = None, max_choices: int | None = None
) -> Iterator[tuple[str, list[dict]]]:
    """(base URL, the requests it got) of a judge running until the block ends."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "auth": self.headers.get("Authorization"), **request})
            time.sleep(delay)
            replies = [answer(request) for _ in range(min(request.get("n", 1), max_choices or request.get("n", 1)))]
            failed = next((got for got in replies if isinstance(got, tuple)), None)
            status, body = failed if failed else (200, _completion(request["model"], *replies))
            self._send(status, body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append({"path": self.path, "auth": self.headers.get("Authorization")})
            if self.path == "/v1/models" and models is not None:
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up (its timeout) leaves a broken pipe: that is what the test wanted


def _completion(model: str, *texts: str) -> dict:
    return {
        "id": "judge-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            for i, text in enumerate(texts)
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
