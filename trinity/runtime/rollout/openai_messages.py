"""The messages of an engine's OpenAI endpoint: a request's messages as chat templates read them, and a reply as the
assistant message OpenAI's clients read: its reasoning split off (reasoning_parser), its tool calls parsed
(tool_call_parser), as vLLM's chat server answers with --reasoning-parser and --tool-call-parser."""

import json
import uuid

from ..data import reasoning
from ..data.tool_calls import FORMATS, ToolCallError, text_around
from .openai_requests import ApiError


def reply_message(
    text: str, call_format: str | None, tools: list[dict], reasoning_format: str | None, thinking: bool
) -> dict:
    """The assistant message of a reply: its reasoning (`reasoning_format`'s, under vLLM 0.31's `reasoning` and the
    older `reasoning_content`, which clients of earlier vLLMs and DeepSeek's API read) and its content, whose tool
    calls `call_format` reads (none: the content is the model's text)."""
    thought, content = reasoning.FORMATS.get(reasoning_format, _all_content)(text, thinking)
    message = {"role": "assistant", "content": content}
    calls = tool_calls(content or "", call_format, tools)
    if calls:
        message = {"role": "assistant", "content": text_around(call_format, content) or None, "tool_calls": calls}
    if thought is not None:
        message |= {"reasoning": thought, "reasoning_content": thought}
    return message


def _all_content(reply: str, thinking: bool) -> reasoning.Split:
    """No reasoning parser: the reply is the content."""
    return None, reply


def for_template(message: dict) -> dict:
    """A message as chat templates read it: tool-call arguments as a mapping (OpenAI sends them as JSON text), and
    no content as empty text."""
    out = dict(message)
    if out.get("content") is None:
        out["content"] = ""
    if out.get("tool_calls"):
        out["tool_calls"] = [_call_for_template(c) for c in out["tool_calls"]]
    return out


def _call_for_template(call: dict) -> dict:
    function = dict(call.get("function") or {})
    if isinstance(function.get("arguments"), str):
        try:
            function["arguments"] = json.loads(function["arguments"])
        except json.JSONDecodeError:
            raise ApiError(400, f"tool call {function.get('name')!r}: its arguments are not JSON", "messages") from None
    return {**call, "function": function}


def tool_calls(text: str, call_format: str | None, tools: list[dict]) -> list[dict]:
    """The reply's calls in OpenAI's layout; none when it has none, or when they do not parse (the reply is then the
    model's text, for the agent to read as it would any answer)."""
    if call_format is None:
        return []
    functions = {t.get("function", {}).get("name"): t.get("function", {}) for t in tools}
    try:
        calls = FORMATS[call_format](text, list(functions))
    except ToolCallError:
        return []
    out = []
    for call in calls:
        arguments = call.arguments
        if call.text is not None:  # brackets: the tool's one argument, named by its schema
            names = list(functions.get(call.name, {}).get("parameters", {}).get("properties", {}))
            if len(names) != 1:
                return []
            arguments = {names[0]: call.text}
        out.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(arguments)},
            }
        )
    return out
