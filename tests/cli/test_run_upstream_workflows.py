"""Trinity-RFT's judged math example as a user runs it: `trinity run` of math_rm_workflow scored by
trajectory_accuracy_grader_reward, whose judge is an OpenAI-compatible stand-in this test starts on loopback (its URL
in the variable the config names), trained with m2po on the demo's tiny model: every rollout judged once with the
conversation it answers, the judge's grade the reward the buffer keeps (summed as upstream's math_rm_workflow does),
and M2PO's mask taken over the batch by the real verl rank (m2_threshold 0: every trust-region token with a nonzero
log-ratio masked; step 2's rollouts are one update old)."""

import json
import re

import pytest
import yaml

from tests.conftest import REPO, run_process
from tests.runtime.rewards.judge_standin import judge_standin
from tests.session_ray import own_ray

pytest.importorskip("verl")
pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.train]

URL_ENV = "TRINITY_TEST_JUDGE_URL"


def grade(prompt: str, reply: str) -> int:
    """The stand-in's rubric: 3 for the right sum, 2 for another number, 1 for anything else."""
    a, b = map(int, prompt.rstrip("=").split("+"))
    return 3 if reply == str(a + b) else 2 if reply.isdigit() else 1


GIVEN: list[int] = []  # the grades the stand-in gave, in order


def judge(request: dict) -> str:
    shown = request["messages"][-1]["content"]
    found = re.search(r"<trajectory>\n\[user\] (\S+)\n\n\[assistant\] ?(.*?)\n</trajectory>", shown, re.S)
    GIVEN.append(grade(*found.groups()))  # the conversation is the prompt as the user's turn and the model's reply
    return json.dumps({"reason": "checked", "score": GIVEN[-1]})


def run_config() -> dict:
    config = yaml.safe_load((REPO / "examples" / "arith" / "arith.yaml").read_text())
    config.pop("stages")
    config["name"] = "judged"
    config["algorithm"] = {
        "algorithm_type": "m2po",
        "repeat_times": 8,
        "optimizer": {"lr": 1.0e-3},
        "policy_loss_fn_args": {"m2_threshold": 0.0},
    }
    config["model"]["custom_chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    explorer_input = config["buffer"]["explorer_input"]
    explorer_input |= {
        "default_workflow_type": "math_rm_workflow",
        "default_reward_fn_type": "trajectory_accuracy_grader_reward",
        "eval_tasksets": [],
    }
    explorer_input["taskset"]["reward_fn_args"] = {"model_name": "judge-1", "judge_api_base_url_env": URL_ENV}
    config["buffer"] |= {"batch_size": 2, "total_steps": 2}
    config["buffer"]["trainer_input"]["experience_buffer"] |= {"storage_type": "file", "path": "judged.jsonl"}
    config["explorer"] |= {"eval_on_startup": False}
    config["synchronizer"] |= {"sync_interval": 2}  # step 2 explores with the weights step 1 trained from
    return config


def test_a_judged_math_run_trains_on_the_judges_grades_with_m2po(run_env, tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(run_config()))
    GIVEN.clear()
    with judge_standin(judge) as (url, seen):
        env = {**own_ray(run_env), URL_ENV: url}  # the reward reads the variable in its role: a Ray of the run's own
        args = ("run", "-c", "run.yaml", "hardware=cpu", "cluster.ray_address=local")
        result = run_process(*args, cwd=tmp_path, env=env, timeout=600)
    assert result.code == 0, result.err[-6000:]
    judged = [json.loads(line) for line in (tmp_path / "judged.jsonl").read_text().splitlines()]
    assert len(judged) == len(seen) == 2 * 2 * 8  # every rollout judged once, through the endpoint the config names
    assert {r["model"] for r in seen} == {"judge-1"} and {r["path"] for r in seen} == {"/v1/chat/completions"}

    assert sorted(e["metrics"]["trajectory_score"] for e in judged) == sorted(GIVEN) and len(set(GIVEN)) > 1
    for e in judged:
        score = e["metrics"]["trajectory_score"]
        assert e["reward"] == pytest.approx(score + (score - 1) / 2)  # the grade plus its normalised reward
    run_dir = tmp_path / "ckpt" / "trinity-demo" / "judged"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    explored = [r for r in records if r["role"] == "explorer"]
    trained = [r for r in records if r["role"] == "trainer"]
    first = [e["metrics"]["trajectory_score"] for e in judged[:16]]
    assert explored[0]["trajectory_score_mean"] == pytest.approx(sum(first) / 16)
    assert len(trained) == 2 and all(r["loss"] is not None for r in trained)
    late = trained[1]  # one update after the weights its rollouts came from: a nonzero log-ratio on every token
    assert late["m2po_trust_region_fraction"] > 0, late
    # m2_threshold 0 keeps no trust-region token of a nonzero log-ratio: all are masked, none is left
    assert late["m2po_masked_fraction"] == pytest.approx(late["m2po_trust_region_fraction"])
    assert late["m2po_m2_before"] > 0 and late["m2po_m2_after"] == 0.0
