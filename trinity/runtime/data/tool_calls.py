"""Tool calls in a model's reply, by the format its chat template teaches.

- `hermes`: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one block per call: what the chat templates of
  Qwen2.5, Qwen3 and Hermes render tools for.
- `brackets`: `[text]`: a call of the toolbox's only tool with `text` as its one argument; short enough for a tiny
  character-level model (examples/arith_tools).

A reply with no call is the model's answer. A call that does not parse raises ToolCallError naming what is wrong;
a workflow feeds that back to the model as the tool's reply.
"""

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field


class ToolCallError(ValueError):
    """A tool call in a reply that does not parse, names no known tool, or has arguments the tool does not take."""


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name and its keyword arguments, or its one positional argument (`text`)."""

    name: str
    arguments: dict = field(default_factory=dict)
    text: str | None = None  # brackets: the one argument, as written


HERMES = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
BRACKETS = re.compile(r"\[([^\[\]]*)(\]|$)")


def hermes(reply: str, tools: list[str]) -> list[ToolCall]:
    """The `<tool_call>` blocks of a reply."""
    calls = []
    for body, closed in HERMES.findall(reply):
        if not closed:
            raise ToolCallError("a <tool_call> block is not closed with </tool_call>")
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ToolCallError(
                f"a tool call is not JSON ({exc.msg} at character {exc.pos}): {body.strip()[:80]}"
            ) from None
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ToolCallError(f'a tool call needs {{"name": ..., "arguments": {{...}}}}: {body.strip()[:80]}')
        arguments = data.get("arguments", {})
        if isinstance(arguments, str):  # some models write the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                raise ToolCallError(f"tool call {data['name']!r}: its arguments are not a JSON object") from None
        if not isinstance(arguments, dict):
            raise ToolCallError(f"tool call {data['name']!r}: its arguments are not a JSON object")
        calls.append(ToolCall(data["name"], arguments))
    return calls


def brackets(reply: str, tools: list[str]) -> list[ToolCall]:
    """`[text]`: the only tool, called with `text`."""
    found = BRACKETS.findall(reply)
    if not found:
        return []
    if len(tools) != 1:
        raise ToolCallError(f"the brackets format calls a toolbox's only tool; this one has {len(tools)}")
    calls = []
    for text, closed in found:
        if not closed:
            raise ToolCallError("a [ call is not closed with ]")
        calls.append(ToolCall(tools[0], text=text))
    return calls


FORMATS: dict[str, Callable[[str, list[str]], list[ToolCall]]] = {"hermes": hermes, "brackets": brackets}
PATTERNS = {"hermes": HERMES, "brackets": BRACKETS}  # where each format writes a call in a reply


def text_around(name: str, reply: str) -> str:
    """The reply with the format's calls cut out: what an OpenAI message's `content` holds beside its tool_calls."""
    return PATTERNS[name].sub("", reply).strip()


def parser(name: str) -> Callable[[str, list[str]], list[ToolCall]]:
    """The parser of a tool-call format by name."""
    if name not in FORMATS:
        raise ValueError(f"unknown tool-call format {name!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]
