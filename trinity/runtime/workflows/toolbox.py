"""Python functions a model may call from a workflow: their schemas for the chat template, and the tool messages that
answer a reply's calls.

A bad call never stops the episode: a call that does not parse, an unknown tool, arguments the function does not
take, or an error inside it becomes the tool's reply (`error: ...`), so the model sees what went wrong, and is
counted in `errors`.
"""

import inspect
import json
from collections.abc import Callable

from ..data.tool_calls import ToolCall, ToolCallError, parser

JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array", dict: "object"}


class Toolbox:
    """Named functions and the tool-call format replies use (tool_calls.FORMATS)."""

    def __init__(self, functions: dict[str, Callable], call_format: str = "hermes") -> None:
        self.functions = dict(functions)
        self.parse = parser(call_format)
        self.calls = 0  # tool calls answered, errors included
        self.errors = 0

    def schemas(self) -> list[dict]:
        """Each function as an OpenAI function schema: its docstring's first line, its parameters by annotation."""
        return [_schema(name, fn) for name, fn in self.functions.items()]

    def calls_in(self, reply: str) -> bool:
        """Whether `reply` calls a tool (or tries to: a call that does not parse counts)."""
        try:
            return bool(self.parse(reply, list(self.functions)))
        except ToolCallError:
            return True

    def respond(self, reply: str) -> list[dict] | None:
        """The tool messages answering `reply`'s calls, in order; None when it calls nothing (it is the answer)."""
        try:
            calls = self.parse(reply, list(self.functions))
        except ToolCallError as exc:
            self.calls, self.errors = self.calls + 1, self.errors + 1
            return [{"role": "tool", "content": f"error: {exc}"}]
        if not calls:
            return None
        return [{"role": "tool", "name": call.name, "content": self._run(call)} for call in calls]

    def answer(self, name: str, arguments: str) -> str:
        """The tool's reply to a structured call (OpenAI's tool_calls: a name and its arguments as JSON text)."""
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            self.calls, self.errors = self.calls + 1, self.errors + 1
            return f"error: tool call {name!r}: its arguments are not JSON ({exc.msg})"
        if not isinstance(parsed, dict):
            self.calls, self.errors = self.calls + 1, self.errors + 1
            return f"error: tool call {name!r}: its arguments are not a JSON object"
        return self._run(ToolCall(name, parsed))

    def _run(self, call: ToolCall) -> str:
        self.calls += 1
        fn = self.functions.get(call.name)
        try:
            if fn is None:
                raise ToolCallError(f"unknown tool {call.name!r} (tools: {', '.join(self.functions)})")
            _check_arguments(call, fn)
            return str(fn(call.text) if call.text is not None else fn(**call.arguments))
        except Exception as exc:  # the tool's reply says what went wrong; the episode goes on
            self.errors += 1
            return f"error: {exc}" if isinstance(exc, ToolCallError) else f"error: {type(exc).__name__}: {exc}"


def _check_arguments(call: ToolCall, fn: Callable) -> None:
    try:
        inspect.signature(fn).bind(*([call.text] if call.text is not None else []), **call.arguments)
    except TypeError as exc:
        raise ToolCallError(f"tool {call.name!r}: {exc}") from None


def _schema(name: str, fn: Callable) -> dict:
    params = inspect.signature(fn).parameters
    properties = {p: {"type": JSON_TYPES.get(v.annotation, "string")} for p, v in params.items()}
    required = [p for p, v in params.items() if v.default is inspect.Parameter.empty]
    doc = (inspect.getdoc(fn) or "").split("\n")[0]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": doc,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }
