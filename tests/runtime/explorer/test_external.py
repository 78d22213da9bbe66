"""An external (API) model as the rollout model (model.external_model, mode bench): the explorer's workflows ask an
OpenAI-compatible stand-in on loopback through the real `openai` client (trinity/runtime/explorer/external.py), and the
driver's check before Ray says what is wrong with the endpoint, its key masked."""

import json
import socket

import pytest

from tests.runtime.rewards.judge_standin import judge_standin
from trinity.config.compose import Request
from trinity.config.resolve import resolve
from trinity.runtime.explorer import external
from trinity.runtime.explorer.external import MASK, External, ExternalModelError, api_url
from trinity.runtime.explorer.role import Explorer

KEY = "sk-the-real-key-123"
ROWS = [
    {"question": "What is 1+1?", "answer": "#### 2"},
    {"question": "What is 2+3?", "answer": "#### 5"},
    {"question": "What is 4+4?", "answer": "#### 8"},
]
BENCH = """\
mode: bench
model:
  model_path: qwen3-max
  max_model_len: 512
  max_response_tokens: 64
  external_model: {enable: true, model_name: qwen3-max}
buffer:
  batch_size: 2
  explorer_input:
    eval_tasksets:
      - name: sums
        path: ./data
        split: test
        format: {prompt_key: question, response_key: answer, system_prompt: "Answer after ####."}
        rollout_args: {temperature: 0.7}
    default_eval_workflow_type: math_workflow
"""


def sums(request: dict) -> str:
    """Right on 1+1 and 2+3, wrong on anything else."""
    question = request["messages"][-1]["content"]
    return {"What is 1+1?": "1+1 is 2. #### 2", "What is 2+3?": "#### 5"}.get(question, "#### 0")


@pytest.fixture
def resolved(tmp_path, monkeypatch):
    """`resolved(*overrides)`: the bench config above, resolved, with its data set in the test's folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "run.yaml").write_text(BENCH)
    return lambda *overrides: resolve(Request(tmp_path / "run.yaml", ("hardware=cpu", *overrides)))


@pytest.fixture
def api(monkeypatch):
    """`api(answer, **standin)`: a stand-in started, its URL and KEY exported as the config's variables name them."""

    def start(answer=sums, url_env="OPENAI_BASE_URL", key_env="OPENAI_API_KEY", **standin):
        context = judge_standin(answer, **standin)
        url, seen = context.__enter__()
        request_finalizer.append(context)
        monkeypatch.setenv(url_env, url)
        monkeypatch.setenv(key_env, KEY)
        return url, seen

    request_finalizer: list = []
    yield start
    for context in request_finalizer:
        context.__exit__(None, None, None)


def explorer_of(config) -> Explorer:
    role = Explorer(name="explorer", role="explorer", config=config, run_dir=config.checkpoint_root_dir)
    role.setup([], None, config.model.model_path)
    return role


def test_an_evaluation_asks_the_api_and_scores_its_replies(resolved, api):
    url, seen = api(models=["qwen3-max"])
    role = explorer_of(resolved().config)
    assert role.tokenizer is None and role.engines == []  # no engines, no model folder: model_path is a name
    [record] = role.evaluate(0)
    assert record["taskset"] == "sums" and record["tasks"] == 3 and record["failed"] == 0
    assert record["accuracy"] == pytest.approx(2 / 3)
    asked = [s for s in seen if s["path"] == "/v1/chat/completions"]
    assert len(asked) == 3
    first = next(s for s in asked if s["messages"][-1]["content"] == "What is 1+1?")
    assert first["auth"] == f"Bearer {KEY}" and first["model"] == "qwen3-max"
    assert first["messages"] == [
        {"role": "system", "content": "Answer after ####."},
        {"role": "user", "content": "What is 1+1?"},
    ]
    # the taskset's sampling: its temperature, the model's top_p and max_response_tokens; nothing the API lacks
    assert (first["temperature"], first["top_p"], first["max_tokens"]) == (0.7, 1.0, 64)
    assert "top_k" not in first and "n" not in first and "extra_body" not in first
    role.release()


def test_repeat_times_are_asked_as_n_choices_and_topped_up_where_the_api_gives_fewer(resolved, api):
    _, seen = api(max_choices=1)  # an API that answers one choice whatever n asks
    config = resolved("buffer.explorer_input.eval_tasksets.0.repeat_times=3").config
    role = explorer_of(config)
    ts = role.evals[0]
    client = role._client(0, ts.sampling)
    completions = client.generate(client.prompt(ts.tasks[0]), 3)
    assert [c.text for c in completions] == ["1+1 is 2. #### 2"] * 3
    assert all(c.response_ids == [] and c.logprobs == [] and c.stopped for c in completions)
    assert [s.get("n") for s in seen] == [3, 2, None]  # asked 3, got 1; asked the 2 left; then the last one
    _, seen_all = api(url_env="OPENAI_BASE_URL")  # a second stand-in that gives every choice asked
    client = explorer_of(config)._client(0, ts.sampling)
    assert len(client.generate(client.prompt(ts.tasks[0]), 3)) == 3 and [s["n"] for s in seen_all] == [3]


def test_a_chat_sends_its_tools_and_the_thinking_switch(resolved, api):
    _, seen = api()
    role = explorer_of(resolved("model.enable_thinking=false").config)
    ts = role.evals[0]
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "user", "content": "What is 2+3?"}]
    [completion] = role._client(0, ts.sampling).chat(ts.tasks[0], messages, 1, tools)
    assert completion.text == "#### 5"
    assert seen[-1]["tools"] == tools and seen[-1]["messages"] == messages
    assert seen[-1]["chat_template_kwargs"] == {"enable_thinking": False}  # extra_body: in the request's body


def test_a_refused_key_fails_the_task_with_what_to_check_and_the_key_masked(resolved, api):
    def refuse(request):
        return 401, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}

    api(refuse)
    role = explorer_of(resolved("explorer.max_retry_times=0").config)
    ts = role.evals[0]
    client = role._client(0, ts.sampling)
    with pytest.raises(ExternalModelError) as err:
        client.generate(client.prompt(ts.tasks[0]), 1)
    text = str(err.value)
    assert "answered 401: Incorrect API key provided: ***" in text and KEY not in text
    assert "check the key in OPENAI_API_KEY, model.external_model.api_key_env" in text
    with pytest.raises(Exception, match=r"every task of evaluation of sums at step 0 failed") as err:
        role.evaluate(0)
    assert KEY not in str(err.value) and MASK in str(err.value)


def test_an_unreachable_api_is_said_with_its_url_never_a_hang(resolved, monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}")
    config = resolved().config
    api = External.of(config)
    assert api.url == f"http://127.0.0.1:{port}/v1"  # /v1 appended, as Trinity-RFT does
    client = external.ExternalModelClient(
        api, api.client(5.0, max_retries=0), explorer_of(config).evals[0].sampling, None
    )
    with pytest.raises(
        ExternalModelError, match=rf"cannot reach the external model's API at http://127.0.0.1:{port}/v1"
    ):
        client.generate("What is 1+1?", 1)
    [issue] = external.issues(resolved())  # the driver's check before Ray says the same, and what to check
    assert issue.key == "model.external_model.base_url_env" and "cannot reach the external model's API" in issue.message
    assert issue.hint == "check OPENAI_BASE_URL and that this machine reaches it"


def test_a_multi_turn_conversation_or_recorded_calls_are_refused_by_name(resolved, api):
    api()
    role = explorer_of(resolved().config)
    client = role._client(0, role.evals[0].sampling)
    with pytest.raises(ExternalModelError, match="multi-turn conversation in the chat template's tokens"):
        client.conversation(role.evals[0].tasks[0])
    with pytest.raises(ExternalModelError, match="calls carry no token ids to record"):
        client.recorded_calls(client.openai_client())


def test_the_base_url_gets_v1_once():
    assert api_url("https://host/") == "https://host/v1"
    assert api_url("https://host/v1/") == "https://host/v1"
    assert api_url(" http://127.0.0.1:8000/v1 ") == "http://127.0.0.1:8000/v1"
    assert (
        api_url("https://dashscope.aliyuncs.com/compatible-mode/v1")
        == "https://dashscope.aliyuncs.com/compatible-mode/v1"
    )


# --- the driver's check before Ray -------------------------------------------------------------------------------


def test_the_check_before_ray_wants_the_url_variable_set(resolved, monkeypatch):
    monkeypatch.delenv("API_URL", raising=False)
    [issue] = external.issues(resolved("model.external_model.base_url_env=API_URL"))
    assert (
        issue.key == "model.external_model.base_url_env"
        and issue.source == "override 'model.external_model.base_url_env=API_URL'"
    )
    assert (
        issue.message == "API_URL (model.external_model.base_url_env) is not set: it holds the external model's API URL"
    )
    assert issue.hint == "export API_URL=https://<host>/v1 (the API's OpenAI-compatible URL) where trinity runs"


def test_the_check_before_ray_names_a_refused_key_masked_and_a_model_not_served(resolved, api):
    def refuse(request):
        return 401, {"error": {"message": f"bad key {KEY}"}}

    api(refuse, models=None)  # no model list (404): nothing more to check before the first request
    assert external.issues(resolved()) == []
    _, seen = api(models=["gpt-4o", "qwen-plus"])
    [issue] = external.issues(resolved())
    assert (
        issue.key == "model.external_model.model_name"
        and "serves no model 'qwen3-max' (it lists gpt-4o, qwen-plus)" in issue.message
    )
    assert seen[-1] == {"path": "/v1/models", "auth": f"Bearer {KEY}"}
    assert external.issues(resolved("model.external_model.model_name=qwen-plus")) == []
    assert external.issues(resolved("model.external_model.enable=false")) == []  # nothing asked of engines' runs


def test_the_check_before_ray_reports_a_401_with_the_key_variable(resolved, api, monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Refusing(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        [issue] = external.issues(resolved())
    finally:
        server.shutdown()
        server.server_close()
    assert issue.key == "model.external_model.api_key_env" and issue.hint == "export the API's key in OPENAI_API_KEY"
    assert "answered 401: Incorrect API key provided: ***" in issue.message and KEY not in issue.message


def test_a_cut_tasks_external_client_asks_the_api_nothing_more(resolved, api):
    """explorer.dynamic_timeout / max_timeout: once the explorer cut a task, its client refuses, not the API."""
    import threading

    from trinity.runtime.explorer.runners import TaskCut

    _, seen = api()
    role = explorer_of(resolved().config)
    ts = role.evals[0]
    client = role._client(0, ts.sampling)
    client.cut = threading.Event()
    assert len(client.generate(client.prompt(ts.tasks[0]), 1)) == 1
    client.cut.set()
    with pytest.raises(TaskCut, match="ran past its timeout"):
        client.generate(client.prompt(ts.tasks[0]), 1)
    assert len([s for s in seen if s["path"] == "/v1/chat/completions"]) == 1
    role.release()
