"""`trinity run` of mode bench with an external (API) model (Trinity-RFT's model.external_model), as a user runs it:
the plan starts no engines and hands the explorer the endpoint's URL and key (masked wherever shown), the driver's
check refuses what cannot work before Ray, and a real run scores the stand-in's replies on loopback through the real
`openai` client. The key never reaches the output, the run directory or its logs."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.runtime.rewards.judge_standin import judge_standin

KEY = "sk-bench-secret-42"
ROWS = [{"question": "What is 1+1?", "answer": "#### 2"}, {"question": "What is 2+3?", "answer": "#### 5"}]
BENCH = """\
mode: bench
project: p
name: api
checkpoint_root_dir: ./ckpt
model:
  model_path: qwen3-max
  max_model_len: 512
  max_response_tokens: 64
  external_model:
    enable: true
    model_name: qwen3-max
    api_key_env: BENCH_CRED
buffer:
  batch_size: 2
  explorer_input:
    eval_tasksets:
      - name: sums
        path: ./data
        split: test
        repeat_times: 2
        format: {prompt_key: question, response_key: answer}
    default_eval_workflow_type: math_workflow
"""


def replies(request: dict) -> str:
    return "#### 2" if request["messages"][-1]["content"] == "What is 1+1?" else "#### 4"


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "run.yaml").write_text(BENCH)
    return tmp_path


def trinity(folder, env: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "trinity", "run", "-c", "run.yaml", "hardware=cpu", *args],
        cwd=folder,
        env=full | env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_plan_starts_no_engines_and_masks_the_key_in_any_variable(folder):
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "BENCH_CRED": KEY}
    text = trinity(folder, env, "--dry-run", timeout=120)
    assert text.returncode == 0, text.stderr
    assert "rollout" not in text.stdout.split("environment by role:")[0].split("actors:")[1]  # the explorer alone
    assert (
        "explorer: OPENAI_BASE_URL=http://127.0.0.1:1/v1 (exported) BENCH_CRED=*** (exported) TRINITY_DEVICE=cpu"
        in text.stdout
    )
    data = trinity(folder, env, "--dry-run", "--format", "json", timeout=120)
    assert data.returncode == 0 and KEY not in data.stdout
    [explorer] = json.loads(data.stdout)["actors"]
    assert explorer["env"]["BENCH_CRED"] == "***" and explorer["env_masked"] == ["BENCH_CRED"]
    shown = trinity(folder, env, "--dry-run", "--show-secrets", timeout=120)
    assert f"BENCH_CRED={KEY} (exported)" in shown.stdout  # the actor gets it


def test_a_run_without_the_url_or_asking_a_model_the_api_lacks_ends_before_ray(folder):
    result = trinity(folder, {"BENCH_CRED": KEY}, timeout=120)
    assert result.returncode == 2
    assert (
        "error: schema default: model.external_model.base_url_env: OPENAI_BASE_URL (model.external_model.base_url_env) "
        "is not set: it holds the external model's API URL" in result.stderr
    )
    assert "hint: export OPENAI_BASE_URL=https://<host>/v1" in result.stderr

    with judge_standin(replies, models=["qwen3-max"]) as (url, seen):
        listed = trinity(folder, {"OPENAI_BASE_URL": url, "BENCH_CRED": KEY}, "model.external_model.model_name=gpt-5")
    assert listed.returncode == 2
    assert (
        f"override 'model.external_model.model_name=gpt-5': model.external_model.model_name: the external model's API "
        f"at {url} serves no model 'gpt-5' (it lists qwen3-max)" in listed.stderr
    )
    assert seen and all(s["path"] == "/v1/models" for s in seen)  # nothing generated, no Ray started
    assert KEY not in listed.stdout + listed.stderr


@pytest.fixture
def ray_tmp():
    """A Ray temp dir of the run's own (short: Ray's socket paths must fit): it starts a Ray of its own, never joining
    another one on this machine."""
    folder = tempfile.mkdtemp(prefix="r", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.ray
def test_a_bench_run_scores_the_apis_replies(folder, ray_tmp):
    with judge_standin(replies, models=["qwen3-max"]) as (url, seen):
        # the URL without /v1, as Trinity-RFT's example exports it: trinity appends it
        env = {"OPENAI_BASE_URL": url.removesuffix("/v1"), "BENCH_CRED": KEY, "RAY_TMPDIR": ray_tmp}
        proc = trinity(folder, env, "cluster.ray_address=local")  # a Ray of its own, never another one here
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = folder / "ckpt" / "p" / "api"
    [record] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert (record["role"], record["step"], record["taskset"], record["tasks"]) == ("eval", 0, "sums", 2)
    assert record["accuracy"] == 0.5  # 1+1 answered right (both rollouts), 2+3 wrong
    asked = [s for s in seen if s["path"] == "/v1/chat/completions"]
    assert len(asked) == 2 and all(s["n"] == 2 and s["auth"] == f"Bearer {KEY}" for s in asked)
    assert "gsm8k" not in proc.stdout and "sums 0.500 -> 0.500" in proc.stdout
    assert "BENCH_CRED=*** (exported)" in proc.stderr  # the plan the run prints
    written = [p.read_text(errors="replace") for p in run.rglob("*") if p.is_file()]
    assert written and not any(KEY in text for text in written)
    assert KEY not in proc.stdout + proc.stderr
    assert "the rollout model is qwen3-max at " in (run / "logs" / "explorer.log").read_text()
