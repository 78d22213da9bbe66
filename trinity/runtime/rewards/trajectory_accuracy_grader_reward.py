"""`trajectory_accuracy_grader_reward`: an LLM judge grades the whole conversation 1 to 3 (Trinity-RFT's
`TrajectoryAccuracyGrader`, trinity/common/rewards/open_judge_reward.py at cd48fb2, which runs OpenJudge's
`TrajectoryAccuracyGrader`, openjudge/graders/agent/trajectory/trajectory_accuracy.py of py-openjudge 0.2.4).

The judge is an OpenAI-compatible endpoint whose URL and key are read from the environment variables the arguments
name (`judge_api_base_url_env`, default OPENAI_BASE_URL; `judge_api_key_env`, default OPENAI_API_KEY), asked with the
`openai` client at temperature 0 by default. It is written here against that client rather than through py-openjudge,
whose 18 dependencies (dashscope, nltk, jieba, scikit-learn, ...) trinity does not install and whose runner turns an
unreachable judge into a 0 after retries: here a judge that cannot be reached, or refuses the key or the model, stops
the task with what to set, within `timeout` seconds. The prompt is OpenJudge's in substance: the conversation as
`[role] content` paragraphs, its goal judged from the first message and the last reply, rated on logical coherence,
progress toward the goal and efficiency: 3 achieves the goal without unrelated steps, 2 achieves it with obvious
unnecessary ones, 1 fails; the judge answers JSON {"reason": ..., "score": ...}, the score clipped to [1, 3].

Scores, as upstream: `trajectory_score` (the grade) and `reward` (the grade, mapped from [score_min, score_max] to
[0, 1] and clipped with normalize_score). A judge's own failure (a server error, a reply without a score) grades 0.
"""

import json
import os
import re
from functools import lru_cache
from typing import Any

import openai

SYSTEM = (
    "You are an evaluation assistant. Answer with one JSON object and nothing else, exactly of the form "
    '{"reason": "<a short explanation of the score>", "score": <an integer>}.'
)
RUBRIC = """You label data: you judge how accurate an AI agent's trajectory is, from the conversation below.
Trajectory accuracy is how correctly and effectively the agent's sequence of actions, tool calls and replies reaches
the user's goal.

Weigh three things:
1. Logical coherence: do consecutive steps follow from each other?
2. Progress: does the trajectory move clearly toward the goal?
3. Efficiency: is it reasonably efficient (it need not be perfect, but not needlessly wasteful)?

First find the goal: from the input (where none is given, from the first message) and from the final message's output.
Then judge how well the trajectory reaches that goal, on this scale:
- 3: it reaches the goal with no step unrelated to the task (sensible extra steps that improve the result are fine);
- 2: it reaches the goal, but with obvious unnecessary steps unrelated to the task;
- 1: it does not reach the goal.

<trajectory>
{messages}
</trajectory>

Answer with a JSON object: {{"reason": <why this score>, "score": <1, 2 or 3>}}
JSON:"""
_SCORE = re.compile(r'"score"\s*:\s*"?(-?\d+(?:\.\d+)?)')


class JudgeUnreachable(RuntimeError):
    """The judge could not be asked: the task stops, naming what to set."""


def trajectory_accuracy_grader_reward(
    response: str,
    truth: Any,
    messages: list[dict] | None = None,
    model_name: str = "qwen3-max",
    judge_api_base_url_env: str = "OPENAI_BASE_URL",
    judge_api_key_env: str = "OPENAI_API_KEY",
    normalize_score: bool = True,
    score_min: float = 1.0,
    score_max: float = 3.0,
    temperature: float = 0.0,
    max_concurrency: int = 8,  # upstream's runner grades one conversation per call, as here: nothing to run at once
    reward_name: str = "openjudge_trajectory_accuracy_reward",
    timeout: float = 60.0,
) -> dict[str, float]:
    """The judge's grade of the conversation `messages` ending in `response`, and its normalised reward."""
    conversation = list(messages or [])
    if not conversation or conversation[-1].get("role") != "assistant":
        conversation.append({"role": "assistant", "content": response})
    url = os.environ.get(judge_api_base_url_env, "")
    if not url:
        raise JudgeUnreachable(
            f"trajectory_accuracy_grader_reward: the judge's URL is missing: set the environment variable "
            f"{judge_api_base_url_env} (reward_fn_args.judge_api_base_url_env) to an OpenAI-compatible endpoint"
        )
    client = _client(url, os.environ.get(judge_api_key_env, ""), timeout)
    grade = _grade(client, model_name, temperature, conversation, (judge_api_base_url_env, judge_api_key_env))
    reward = grade
    if normalize_score and score_max > score_min:
        reward = min(1.0, max(0.0, (grade - score_min) / (score_max - score_min)))
    return {"trajectory_score": grade, "reward": reward}


@lru_cache(maxsize=8)
def _client(url: str, key: str, timeout: float) -> Any:
    """One client per judge, its connections reused; no retries, so that a dead judge answers within `timeout`."""
    return openai.OpenAI(base_url=url, api_key=key or "EMPTY", timeout=timeout, max_retries=0)


def _grade(client: Any, model: str, temperature: float, conversation: list[dict], env: tuple[str, str]) -> float:
    """The judge's score in [1, 3]; 0 where the judge failed on its side (upstream's GraderError)."""
    prompt = RUBRIC.format(messages=render(conversation))
    try:
        reply = client.chat.completions.create(
            model=model,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
            temperature=temperature,
        )
    except (openai.APIConnectionError, openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise JudgeUnreachable(_unreachable(client, exc, env)) from None
    except openai.NotFoundError as exc:
        raise JudgeUnreachable(
            f"trajectory_accuracy_grader_reward: the judge at {client.base_url} has no model {model!r} ({exc}): "
            "set reward_fn_args.model_name to one it serves"
        ) from None
    except openai.APIStatusError:
        return 0.0  # the judge's own error: graded 0, as upstream
    score = parse_score(reply.choices[0].message.content if reply.choices else None)
    return 0.0 if score is None else min(3.0, max(1.0, score))


def _unreachable(client: Any, exc: Exception, env: tuple[str, str]) -> str:
    url_env, key_env = env
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return (
            f"trajectory_accuracy_grader_reward: the judge at {client.base_url} refused the key ({exc}): set "
            f"{key_env} (reward_fn_args.judge_api_key_env) to a key it accepts"
        )
    return (
        f"trajectory_accuracy_grader_reward: the judge at {client.base_url} (from {url_env}) could not be reached "
        f"({type(exc).__name__}: {exc}): set {url_env} (reward_fn_args.judge_api_base_url_env) to a running "
        "OpenAI-compatible endpoint"
    )


def render(messages: list[dict]) -> str:
    """The conversation as the judge reads it: '[role] content' paragraphs, a message's tool calls as JSON."""
    parts = []
    for message in messages:
        content = message.get("content") or ""
        if isinstance(content, list):  # OpenAI's content parts: their text
            content = " ".join(p.get("text", "") for p in content if p.get("type") == "text")
        text = f"[{message.get('role', 'unknown')}]" + (f" {content}" if content else "")
        if message.get("tool_calls"):
            text += "\nTool Calls: " + json.dumps(message["tool_calls"], indent=2, ensure_ascii=False)
        parts.append(text)
    return "\n\n".join(parts)


def parse_score(text: str | None) -> float | None:
    """The score of the judge's JSON answer (the first object in its text), else of a `"score": n` in it."""
    if not text:
        return None
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            found = json.loads(text[start : end + 1])
            if isinstance(found, dict) and isinstance(found.get("score"), (int, float)):
                return float(found["score"])
        except json.JSONDecodeError:
            pass
    match = _SCORE.search(text)
    return float(match.group(1)) if match else None
