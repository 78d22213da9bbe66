"""Serve mode's proxy (Trinity-RFT's explorer/proxy/) in front of two real transformers engines of serve mode on their
real OpenAI endpoints, driven by the `openai` package and httpx over loopback: requests go to the engines in turn,
every call is recorded in SQLite with its credentials masked, /feedback makes experiences of the engines' own ids and
log-probs, an engine that stops answering gets no requests, fewer answering engines than min_running_model_num is a
503, and engines taken out for new weights leave the others serving."""

import asyncio
import json
import socket
import sqlite3
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from trinity.config.compose import Request  # noqa: E402
from trinity.config.resolve import resolve  # noqa: E402
from trinity.runtime.rollout.proxy import Proxy  # noqa: E402
from trinity.runtime.rollout.proxy_records import CallRecords  # noqa: E402
from trinity.runtime.rollout.transformers_engine import TransformersEngine  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
KEY = "sk-proxy-test-secret"


def serve_config(demo_assets, monkeypatch, *overrides):
    monkeypatch.setenv("TRINITY_DEMO_DIR", str(demo_assets))
    example = REPO / "examples/arith_react/arith_react.yaml"
    base = (
        "hardware=cpu",
        "mode=serve",
        "buffer.trainer_input.experience_buffer.storage_type=sql",
        f"explorer.rollout_model.api_key={KEY}",
        "explorer.rollout_model.engine_num=2",
    )
    return resolve(Request(example, (*base, *overrides))).stage("grpo")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_proxy(demo_assets, monkeypatch, tmp_path, body, urls_extra=(), **proxy_args):
    """Two engines set up and serving in this event loop; a proxy in front of them (and of `urls_extra`) in its own
    thread; `body(proxy, engines)` runs while they answer."""
    config = serve_config(demo_assets, monkeypatch)
    engines = [TransformersEngine(name=f"rollout.engine{i}", role="rollout", config=config, index=i) for i in (0, 1)]

    async def main():
        infos = [await e.setup(str(demo_assets / "model-tools"), 3) for e in engines]
        urls = [info["openai_url"] for info in infos] + list(urls_extra)
        records = CallRecords(tmp_path / "calls.db")
        args = {"min_running": 1, "check_interval_s": 0.2, "api_key": KEY, "timeout_s": 60} | proxy_args
        proxy = Proxy(urls, "127.0.0.1", 0, records, **args)
        await asyncio.to_thread(proxy.start)
        try:
            return await body(proxy, engines)
        finally:
            await asyncio.to_thread(proxy.stop)

    return config, asyncio.run(main())


def client(proxy):
    return openai.AsyncOpenAI(base_url=proxy.url, api_key=KEY, max_retries=0)


def rows(tmp_path) -> list[dict]:
    db = sqlite3.connect(tmp_path / "calls.db")
    db.row_factory = sqlite3.Row
    return [dict(r) for r in db.execute("SELECT * FROM proxy_history ORDER BY row")]


def test_calls_go_to_the_engines_in_turn_and_are_recorded_with_their_key_masked(demo_assets, monkeypatch, tmp_path):
    async def body(proxy, engines):
        api = client(proxy)
        name = (await api.models.list()).data[0].id
        chats = [
            await api.chat.completions.create(model=name, messages=[{"role": "user", "content": f"{i}+1="}])
            for i in range(3)
        ]
        text = await api.completions.create(model=name, prompt="12+34=", extra_body={"return_token_ids": True})
        unauthorized = await asyncio.to_thread(
            httpx.post, proxy.url + "/completions", json={"model": name, "prompt": "1"}
        )
        wrong = await asyncio.to_thread(
            httpx.post, proxy.url + "/completions", json={"model": "gpt-4o", "prompt": "1"}, headers=_auth()
        )
        metrics = (
            await asyncio.to_thread(httpx.get, proxy.url.removesuffix("/v1") + "/metrics", headers=_auth())
        ).json()
        return name, chats, text, unauthorized, wrong, metrics

    config, (name, chats, text, unauthorized, wrong, metrics) = with_proxy(demo_assets, monkeypatch, tmp_path, body)
    assert name == config.explorer.rollout_model.model_path
    # round robin: /v1/models took engine 0's turn, then the calls alternate
    assert [e["requests"] for e in metrics["engines"]] == [3, 3]
    assert all(e["healthy"] and e["in_flight"] == 0 for e in metrics["engines"])
    # what the client did not ask for is not in its answer; what it asked for is the engine's own
    first = chats[0].model_dump()
    assert "prompt_token_ids" not in first and "token_ids" not in first["choices"][0]
    assert first["choices"][0].get("logprobs") is None
    assert text.model_extra["prompt_token_ids"] and text.choices[0].model_extra["token_ids"]
    assert unauthorized.status_code == 401 and "explorer.rollout_model.api_key" in unauthorized.text
    assert wrong.status_code == 404 and "the model 'gpt-4o' does not exist" in wrong.text
    recorded = rows(tmp_path)  # the 401 is the proxy's own answer: nothing was forwarded, nothing recorded
    assert [r["path"] for r in recorded] == ["/v1/chat/completions"] * 3 + ["/v1/completions"] * 2
    assert [r["engine"] for r in recorded] == [1, 0, 1, 0, 1]
    assert [r["status"] for r in recorded] == [200, 200, 200, 200, 404]
    assert [r["response_id"] for r in recorded] == [c.id for c in chats] + [text.id, None]
    assert "the model 'gpt-4o' does not exist" in recorded[4]["response"] and recorded[4]["choices"] is None
    assert (metrics["calls"], metrics["failed_calls"], metrics["rewarded_calls"]) == (5, 1, 0)
    everything = json.dumps(recorded)
    assert KEY not in everything and "Bearer ***" in recorded[0]["headers"]
    choices = json.loads(recorded[3]["choices"])
    assert choices[0]["response_ids"] == text.choices[0].model_extra["token_ids"]
    assert choices[0]["prompt_ids"] == text.model_extra["prompt_token_ids"]
    assert len(choices[0]["logprobs"]) == len(choices[0]["response_ids"])
    assert json.loads(recorded[3]["request"]) == {"model": name, "prompt": "12+34=", "return_token_ids": True}


def _auth():
    return {"Authorization": f"Bearer {KEY}"}


def test_feedback_makes_experiences_of_the_recorded_calls_once(demo_assets, monkeypatch, tmp_path):
    async def body(proxy, engines):
        api = client(proxy)
        name = engines[0].config.explorer.rollout_model.model_path
        asked = {"return_token_ids": True, "logprobs": 0}
        calls = [await api.completions.create(model=name, prompt=p, extra_body=asked) for p in ("1+2=", "3+4=")]
        feedback = proxy.url.removesuffix("/v1") + "/feedback"

        def post(payload, key=KEY):
            return httpx.post(feedback, json=payload, headers={"Authorization": f"Bearer {key}"})

        answers = [
            await asyncio.to_thread(post, {"ids": [calls[0].id], "reward": 1.0, "group": "g"}),
            await asyncio.to_thread(post, {"ids": [calls[0].id], "reward": 1.0}),  # rewarded already
            await asyncio.to_thread(post, {"ids": ["cmpl-nope"], "reward": 1.0}),
            await asyncio.to_thread(post, {"ids": [calls[1].id], "reward": "high"}),
            await asyncio.to_thread(post, {"ids": [calls[1].id], "reward": 1.0}, key="wrong"),
            # Trinity-RFT's body: msg_ids, task_id, run_id
            await asyncio.to_thread(post, {"msg_ids": [calls[1].id], "reward": 0.0, "task_id": "g", "run_id": 1}),
        ]
        # one episode whose two calls two engines answered (in turn): the second continues the first
        opening = await api.completions.create(model=name, prompt="5+6=", extra_body=asked)
        said = opening.model_extra["prompt_token_ids"] + opening.choices[0].model_extra["token_ids"]
        follow = await api.completions.create(model=name, prompt=said + said[:2], extra_body=asked)
        episode = await asyncio.to_thread(post, {"ids": [opening.id, follow.id], "reward": 0.5, "group": "ep"})
        answers.append(episode)
        made = proxy.take_experiences()
        last = proxy.take_experiences(final=True)
        late = await asyncio.to_thread(post, {"ids": [calls[1].id], "reward": 1.0})
        kept = [e.take_experiences() for e in engines]  # the engines did not keep what the proxy keeps
        return calls, answers + [late], made, last, kept, (opening.id, follow.id)

    _, (calls, answers, made, last, kept, pair) = with_proxy(demo_assets, monkeypatch, tmp_path, body)
    assert [a.status_code for a in answers] == [200, 404, 404, 400, 401, 200, 200, 503]
    assert answers[0].json() == {"experiences": 1} and answers[6].json() == {"experiences": 1}
    assert "no call 'cmpl-nope' waits for a reward at the proxy" in answers[2].text
    assert "reward: Input should be a valid number" in answers[3].text
    assert "the serve run is stopping" in answers[7].text
    first, second, chained = made
    by_id = {r["response_id"]: r for r in rows(tmp_path)}
    opening, follow = (by_id[i] for i in pair)
    assert chained.episode == opening["response_id"]
    assert opening["engine"] != follow["engine"]  # answered by both engines, one experience
    opened = json.loads(opening["choices"])[0]
    assert chained.prompt_ids == opened["prompt_ids"] and (chained.group, chained.reward) == ("ep", 0.5)
    assert chained.metrics["turns"] == 2.0
    assert chained.response_ids[: len(opened["response_ids"])] == opened["response_ids"]
    assert chained.action_mask == [1] * len(opened["response_ids"]) + [0, 0] + [1] * (
        len(chained.response_ids) - len(opened["response_ids"]) - 2
    )
    for exp, call in zip((first, second), calls):
        assert exp.prompt_ids == call.model_extra["prompt_token_ids"]
        assert exp.response_ids == call.choices[0].model_extra["token_ids"]
        assert exp.logprobs == pytest.approx(call.choices[0].logprobs.token_logprobs)
        assert exp.episode == call.id
    assert (first.reward, first.group, first.run) == (1.0, "g", 0)
    assert (second.reward, second.group, second.run) == (0.0, "g", 1)
    assert last == [] and kept == [[], []]
    recorded = {r["response_id"]: r for r in rows(tmp_path)}
    assert (recorded[calls[0].id]["reward"], recorded[calls[0].id]["reward_group"]) == (1.0, "g")
    assert recorded[calls[1].id]["rewarded_at"] is not None


def test_an_engine_that_stops_answering_gets_no_requests_and_too_few_is_a_503(demo_assets, monkeypatch, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there

    async def body(proxy, engines):
        api = client(proxy)
        name = engines[0].config.explorer.rollout_model.model_path
        before = proxy.metrics()
        answers = [await api.completions.create(model=name, prompt=f"{i}+1=") for i in range(4)]
        await engines[1].api.stop()  # engine 1's endpoint goes away
        for _ in range(200):  # the next check (every 0.2 s) finds it down
            if not proxy.metrics()["engines"][1]["healthy"]:
                break
            await asyncio.sleep(0.05)
        after = [await api.completions.create(model=name, prompt=f"{i}+2=") for i in range(2)]
        proxy.min_running = 2  # only engine 0 answers now
        with pytest.raises(openai.APIStatusError) as refused:
            await api.completions.create(model=name, prompt="1+1=")
        health = await asyncio.to_thread(httpx.get, proxy.url.removesuffix("/v1") + "/health")
        return before, answers, after, proxy.metrics(), refused.value, health

    _, (before, answers, after, metrics, refused, health) = with_proxy(
        demo_assets, monkeypatch, tmp_path, body, urls_extra=[dead]
    )
    assert [e["healthy"] for e in before["engines"]] == [True, True, False]
    assert "ConnectError" in before["engines"][2]["problem"]
    assert len(answers) == 4 and len(after) == 2
    assert [e["requests"] for e in metrics["engines"]] == [4, 2, 0]  # 2 + 2 before, then engine 0 alone
    assert [e["healthy"] for e in metrics["engines"]] == [True, False, False]
    assert refused.status_code == 503
    assert "1 of 3 engines answer their health check, fewer than explorer.min_running_model_num=2" in str(refused)
    assert health.status_code == 503 and health.json()["answering"] == 1


def test_engines_taking_weights_leave_min_running_model_num_serving(demo_assets, monkeypatch, tmp_path):
    async def body(proxy, engines):
        api = client(proxy)
        name = engines[0].config.explorer.rollout_model.model_path
        taken = proxy.withdraw([0, 1])  # one engine may go, one keeps serving
        during = [await api.completions.create(model=name, prompt=f"{i}+1=") for i in range(3)]
        drained = await asyncio.to_thread(proxy.drained, taken, 5)
        again = proxy.withdraw([1])  # engine 1 is the last one serving: it stays
        proxy.restore(taken, 7)
        after = [await api.completions.create(model=name, prompt=f"{i}+3=") for i in range(2)]
        return taken, during, drained, again, after, proxy.metrics()

    _, (taken, during, drained, again, after, metrics) = with_proxy(demo_assets, monkeypatch, tmp_path, body)
    assert taken == [0] and again == [] and drained
    assert [e["requests"] for e in metrics["engines"]] == [1, 4]  # engine 1 alone while 0 took weights, then both


def test_the_proxy_says_where_it_cannot_listen(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proxy = Proxy(["http://127.0.0.1:1/v1"], "127.0.0.1", port, CallRecords(tmp_path / "c.db"))
        with pytest.raises(OSError, match=f"the serve proxy cannot listen on 127.0.0.1:{port}: .*explorer.proxy_port"):
            proxy.start()
