"""Serve mode through the real CLI: an outside `openai` client calls the engine's endpoint (listed in the run
directory), rewards its calls at /feedback, and the experiences that makes are what a following `train` run of the
same directory learns from."""

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_process

pytestmark = pytest.mark.train  # a serve run, then a train run
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

KEY = "sk-serve-secret"
LOCAL = "cluster.ray_address=local"  # never a Ray another process runs on this machine (run_env's RAY_ADDRESS wins)
TEMPLATE = (  # examples/arith_tools': each message's text, a tool's result after "="; replies end with <eos>
    "{% for m in messages %}{% if m['role'] == 'tool' %}={% endif %}{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}<eos>{% endif %}{% endfor %}"
)


def config(demo_assets: Path, mode: str) -> dict:
    """One small run directory (project trinity-test, name served) that a serve and a train run share."""
    run = {
        "mode": mode,
        "project": "trinity-test",
        "name": "served",
        "algorithm": {"algorithm_type": "grpo", "repeat_times": 2},
        "model": {
            "model_path": str(demo_assets / "model-tools"),
            "custom_chat_template": TEMPLATE,
            "max_model_len": 32,
            "max_response_tokens": 8,
        },
        "cluster": {"node_num": 1, "gpu_per_node": 1},
        "buffer": {
            "batch_size": 2,
            "total_steps": 1,
            "trainer_input": {"experience_buffer": {"name": "served", "storage_type": "sql"}},
        },
        "explorer": {"rollout_model": {"engine_type": "transformers"}},
    }
    if mode == "train":
        run["buffer"] |= {"batch_size": 1, "train_batch_size": 2}
        run.pop("explorer")
    else:  # the proxy on a free loopback port; the engines and the proxy ask for a key
        run["explorer"] |= {"listen_address": "127.0.0.1", "proxy_port": 0, "service_status_check_interval": 1}
        run["explorer"]["rollout_model"]["api_key"] = KEY
    return run


def endpoint(run_dir: Path, server: subprocess.Popen, timeout_s: float = 240) -> dict:
    """endpoints.json once the serve run has written it."""
    deadline = time.monotonic() + timeout_s
    while not (run_dir / "endpoints.json").exists():
        assert server.poll() is None, server.communicate()[1][-4000:]
        assert time.monotonic() < deadline, "the serve run listed no endpoint"
        time.sleep(0.5)
    return json.loads((run_dir / "endpoints.json").read_text())


def test_outside_calls_rewarded_at_feedback_are_the_experiences_a_train_run_learns_from(run_env, tmp_path, demo_assets):
    """One call through the proxy (recorded in its database, rewarded at its /feedback), one at the engine's own
    endpoint (rewarded there): together the step a train run then learns from."""
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(config(demo_assets, "serve")))
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(config(demo_assets, "train")))
    run_dir = tmp_path / "ckpt" / "trinity-test" / "served"
    command = [sys.executable, "-m", "trinity", "run", "-c", "serve.yaml", "hardware=cpu", LOCAL]
    server = subprocess.Popen(
        command, cwd=tmp_path, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        listed = endpoint(run_dir, server)
        [url], proxy = listed["endpoints"], listed["proxy"]
        assert listed["model"] == str(demo_assets / "model-tools") and listed["needs_api_key"] is True
        assert proxy.startswith("http://127.0.0.1:") and proxy != url
        auth = {"Authorization": f"Bearer {KEY}"}
        through = openai.OpenAI(base_url=proxy, api_key=KEY, max_retries=0)
        chat = through.chat.completions.create(model=listed["model"], messages=[{"role": "user", "content": "12+34="}])
        direct = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
        text = direct.completions.create(model=listed["model"], prompt="12+34=", logprobs=0)
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=proxy, api_key="wrong", max_retries=0).models.list()
        at_proxy, at_engine = proxy.removesuffix("/v1") + "/feedback", url.removesuffix("/v1") + "/feedback"
        unknown = httpx.post(at_proxy, json={"ids": ["chatcmpl-nope"], "reward": 1.0}, headers=auth)
        assert unknown.status_code == 404 and "no call 'chatcmpl-nope' waits for a reward at the proxy" in unknown.text
        elsewhere = httpx.post(at_engine, json={"ids": [chat.id], "reward": 1.0}, headers=auth)
        assert elsewhere.status_code == 404  # the proxy keeps the calls it forwards
        bad = httpx.post(at_proxy, json={"ids": [chat.id], "reward": "high"}, headers=auth)
        assert bad.status_code == 400 and "reward: Input should be a valid number" in bad.text
        first = httpx.post(at_proxy, json={"msg_ids": [chat.id], "reward": 1.0, "task_id": "12+34"}, headers=auth)
        assert first.status_code == 200 and first.json() == {"experiences": 1}
        again = httpx.post(at_proxy, json={"ids": [chat.id], "reward": 1.0}, headers=auth)
        assert again.status_code == 404  # each call is rewarded once
        metrics = httpx.get(proxy.removesuffix("/v1") + "/metrics", headers=auth).json()
        assert (metrics["calls"], metrics["rewarded_calls"], metrics["engines"][0]["healthy"]) == (1, 1, True)
        second = httpx.post(at_engine, json={"ids": [text.id], "reward": 0.0, "group": "12+34"}, headers=auth)
        assert second.status_code == 200, second.text
        out, err = server.communicate(timeout=120)  # one step of batch_size 2: the serve run ends by itself
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, err[-4000:]
    assert (
        f"OpenAI endpoints (listed in {run_dir / 'endpoints.json'}):\n  engine 0: {url}\n"
        f"  proxy (every engine, /feedback, calls recorded): {proxy}\n"
    ) in err
    db = sqlite3.connect(run_dir / "proxy_history.db")  # explorer.db_url unset: in the run directory
    [(response_id, path, status, headers, reward)] = db.execute(
        "SELECT response_id, path, status, headers, reward FROM proxy_history"
    ).fetchall()
    assert (response_id, path, status, reward) == (chat.id, "/v1/chat/completions", 200, 1.0)
    assert "Bearer ***" in headers and KEY not in headers
    with pytest.raises(httpx.ConnectError):  # the proxy stopped with the run
        httpx.get(proxy.removesuffix("/v1") + "/health")
    assert not (run_dir / "endpoints.json").exists()  # gone with the stage that served it
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    [served] = [r for r in records if r["role"] == "explorer"]
    assert (served["experiences"], served["reward_mean"]) == (2, 0.5)

    train = run_process("run", "-c", "train.yaml", "hardware=cpu", LOCAL, cwd=tmp_path, env=run_env, timeout=600)
    assert train.code == 0, train.err[-4000:]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    [trained] = [r for r in records if r["role"] == "trainer"]
    assert trained["experiences"] == 2 and trained["loss"] is not None


def test_a_proxy_port_in_use_stops_the_serve_run_with_exit_2_naming_the_key(run_env, tmp_path, demo_assets):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "serve.yaml").write_text(yaml.safe_dump(config(demo_assets, "serve")))
        result = run_process(
            "run", "-c", "serve.yaml", "hardware=cpu", LOCAL, f"explorer.proxy_port={port}", cwd=tmp_path, env=run_env
        )
    assert result.code == 2, result.err[-4000:]
    assert (
        f"explorer.proxy_port: the serve proxy cannot listen on 127.0.0.1:{port}: Address already in use "
        "(explorer.listen_address, explorer.proxy_port)" in result.err
    )
    assert "hint: free that port, choose another (explorer.proxy_port; 0: any free one)" in result.err
    assert "Traceback" not in result.err and "internal error" not in result.err
    assert not (tmp_path / "ckpt" / "trinity-test" / "served" / "endpoints.json").exists()
