"""Serve mode through the real CLI: an outside `openai` client calls the engine's endpoint (listed in the run
directory), rewards its calls at /feedback, and the experiences that makes are what a following `train` run of the
same directory learns from."""

import json
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
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(config(demo_assets, "serve")))
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(config(demo_assets, "train")))
    run_dir = tmp_path / "ckpt" / "trinity-test" / "served"
    command = [sys.executable, "-m", "trinity", "run", "-c", "serve.yaml", "hardware=cpu"]
    server = subprocess.Popen(
        command, cwd=tmp_path, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        listed = endpoint(run_dir, server)
        [url] = listed["endpoints"]
        assert listed["model"] == str(demo_assets / "model-tools") and listed["needs_api_key"] is False
        client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
        chat = client.chat.completions.create(model=listed["model"], messages=[{"role": "user", "content": "12+34="}])
        text = client.completions.create(model=listed["model"], prompt="12+34=", logprobs=0)
        feedback = url.removesuffix("/v1") + "/feedback"
        unknown = httpx.post(feedback, json={"ids": ["chatcmpl-nope"], "reward": 1.0})
        assert unknown.status_code == 404 and "no call 'chatcmpl-nope' waits for a reward here" in unknown.text
        bad = httpx.post(feedback, json={"ids": [chat.id], "reward": "high"})
        assert bad.status_code == 400 and "reward: Input should be a valid number" in bad.text
        first = httpx.post(feedback, json={"ids": [chat.id], "reward": 1.0, "group": "12+34"})
        assert first.status_code == 200 and first.json() == {"experiences": 1}
        again = httpx.post(feedback, json={"ids": [chat.id], "reward": 1.0})
        assert again.status_code == 404  # each call is rewarded once
        second = httpx.post(feedback, json={"ids": [text.id], "reward": 0.0, "group": "12+34"})
        assert second.status_code == 200, second.text
        out, err = server.communicate(timeout=120)  # one step of batch_size 2: the serve run ends by itself
    finally:
        if server.poll() is None:
            server.kill()
    assert server.returncode == 0, err[-4000:]
    assert f"OpenAI endpoints (listed in {run_dir / 'endpoints.json'}):\n  engine 0: {url}" in err
    assert not (run_dir / "endpoints.json").exists()  # gone with the stage that served it
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    [served] = [r for r in records if r["role"] == "explorer"]
    assert (served["experiences"], served["reward_mean"]) == (2, 0.5)

    train = run_process("run", "-c", "train.yaml", "hardware=cpu", cwd=tmp_path, env=run_env, timeout=600)
    assert train.code == 0, train.err[-4000:]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    [trained] = [r for r in records if r["role"] == "trainer"]
    assert trained["experiences"] == 2 and trained["loss"] is not None
