"""trajectory_accuracy_grader_reward against a judge stand-in on loopback, through the real `openai` client: the
conversation it is shown, the grade and its normalised reward, the URL and key taken from the variables its arguments
name; a judge that fails on its side grades 0 (as upstream), one that cannot be reached, refuses the key or the
model, or does not answer in time stops the task saying what to set, within its timeout."""

import json
import socket
import time

import pytest

from tests.runtime.rewards.judge_standin import grade_by_answer, judge_standin
from trinity.config.rewards import TrajectoryJudgeArgs
from trinity.config.schema.buffer import FormatConfig
from trinity.runtime.rewards import bind
from trinity.runtime.rewards.trajectory_accuracy_grader_reward import JudgeUnreachable, parse_score, render
from trinity.runtime.workflows import Completion, Task, load

NAME = "trajectory_accuracy_grader_reward"
ASKED = [{"role": "system", "content": "Add."}, {"role": "user", "content": "12+30="}]


def graded(url_env: str = "JUDGE_URL", key_env: str = "JUDGE_KEY", **args):
    return bind(NAME, {"judge_api_base_url_env": url_env, "judge_api_key_env": key_env, **args})


def test_the_judge_grades_the_conversation_ending_in_the_reply(monkeypatch):
    with judge_standin(grade_by_answer(lambda reply: reply == "42")) as (url, seen):
        monkeypatch.setenv("JUDGE_URL", url)
        monkeypatch.setenv("JUDGE_KEY", "sk-judge")
        reward = graded(model_name="judge-7b")
        assert reward("42", None, messages=ASKED) == {"trajectory_score": 3.0, "reward": 1.0}
        assert reward("41", None, messages=ASKED) == {"trajectory_score": 1.0, "reward": 0.0}
    first = seen[0]
    assert (first["path"], first["auth"], first["model"], first["temperature"]) == (
        "/v1/chat/completions",
        "Bearer sk-judge",
        "judge-7b",
        0.0,
    )
    system, user = first["messages"]
    assert system["role"] == "system" and '"score"' in system["content"]
    # the whole conversation, as '[role] content' paragraphs, the reply as the assistant's last turn
    assert "<trajectory>\n[system] Add.\n\n[user] 12+30=\n\n[assistant] 42\n</trajectory>" in user["content"]


@pytest.mark.parametrize(
    "answer,grade,reward",
    [
        ('{"reason": "ok", "score": 2}', 2.0, 0.5),
        ('Sure. ```json\n{"reason": "fine", "score": "3"}\n```', 3.0, 1.0),  # a score as text, fenced
        ('{"reason": "great", "score": 5}', 3.0, 1.0),  # clipped to [1, 3], as OpenJudge does
        ("no JSON at all", 0.0, 0.0),  # the judge's failure: graded 0, as upstream
        ((500, {"error": {"message": "overloaded"}}), 0.0, 0.0),
        ((429, {"error": {"message": "slow down"}}), 0.0, 0.0),
    ],
)
def test_grades_map_to_rewards_and_a_judges_own_failure_grades_zero(monkeypatch, answer, grade, reward):
    with judge_standin(lambda request: answer) as (url, _):
        monkeypatch.setenv("JUDGE_URL", url)
        assert graded()("x", None, messages=ASKED) == {"trajectory_score": grade, "reward": reward}


def test_normalisation_follows_the_range_or_is_off(monkeypatch):
    with judge_standin(lambda request: '{"score": 2}') as (url, _):
        monkeypatch.setenv("JUDGE_URL", url)
        assert graded(score_min=0.0, score_max=4.0)("x", None)["reward"] == 0.5
        assert graded(normalize_score=False)("x", None) == {"trajectory_score": 2.0, "reward": 2.0}
    with pytest.raises(ValueError, match=r"score_max \(1.0\) must be above score_min \(1.0\)"):
        TrajectoryJudgeArgs(score_max=1.0)


def test_without_the_url_variable_the_error_names_it(monkeypatch):
    monkeypatch.delenv("JUDGE_URL", raising=False)
    with pytest.raises(JudgeUnreachable, match="set the environment variable JUDGE_URL"):
        graded()("x", None)


def test_an_unreachable_judge_says_what_to_set_at_once(monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("JUDGE_URL", f"http://127.0.0.1:{port}/v1")
    started = time.monotonic()
    with pytest.raises(JudgeUnreachable, match=rf"127.0.0.1:{port}/v1/ \(from JUDGE_URL\) could not be reached.*set "):
        graded()("x", None)
    assert time.monotonic() - started < 5  # no retries


def test_a_judge_that_does_not_answer_in_time_stops_the_task(monkeypatch):
    with judge_standin(lambda request: '{"score": 3}', delay=3.0) as (url, _):
        monkeypatch.setenv("JUDGE_URL", url)
        started = time.monotonic()
        with pytest.raises(JudgeUnreachable, match="could not be reached .APITimeoutError"):
            graded(timeout=0.5)("x", None)
        assert time.monotonic() - started < 2.5


def test_a_refused_key_or_model_names_the_setting(monkeypatch):
    refused = (401, {"error": {"message": "bad key"}})
    with judge_standin(lambda request: refused) as (url, _):
        monkeypatch.setenv("JUDGE_URL", url)
        with pytest.raises(JudgeUnreachable, match="refused the key .*set JUDGE_KEY"):
            graded()("x", None)
    unknown = (404, {"error": {"message": "no such model"}})
    with judge_standin(lambda request: unknown) as (url, _):
        monkeypatch.setenv("JUDGE_URL", url)
        with pytest.raises(JudgeUnreachable, match="has no model 'qwen3-max'.*set reward_fn_args.model_name"):
            graded()("x", None)


def test_math_rm_workflow_scores_with_the_judge_and_sums_its_scores(monkeypatch):
    class Model:
        tokenizer = None

        def chat(self, task, messages, n, tools=None):
            return [Completion([1], [2], [-0.1], text, 0) for text in ["42", "7"][:n]]

    fmt = FormatConfig(prompt_type="plaintext", prompt_key="prompt", response_key="response", system_prompt="Add.")
    with judge_standin(grade_by_answer(lambda reply: reply == "42")) as (url, seen):
        monkeypatch.setenv("JUDGE_URL", url)
        task = Task("t/0", {"prompt": "12+30=", "response": "42"}, fmt, 2, reward_fn=graded())
        exps = load("math_rm_workflow")(task, Model()).run()
    assert [e.reward for e in exps] == [4.0, 1.0]  # upstream's sum: the grade plus its normalised reward
    assert [e.metrics["trajectory_score"] for e in exps] == [3.0, 1.0]
    assert "[user] 12+30=\n\n[assistant] 42" in seen[0]["messages"][-1]["content"]


def test_the_rendering_and_the_score_parser():
    calls = [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    text = render(
        [{"role": "user", "content": [{"type": "text", "text": "hi"}]}, {"role": "assistant", "tool_calls": calls}]
    )
    assert text == "[user] hi\n\n[assistant]\nTool Calls: " + json.dumps(calls, indent=2)
    assert parse_score('{"score": 2.5}') == 2.5 and parse_score('"score": 1,') == 1.0 and parse_score("") is None
