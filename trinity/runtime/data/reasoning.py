"""The reasoning in a model's chat reply, split from its content as vLLM 0.31's reasoning parsers of the same names
split it (explorer.rollout_model.reasoning_parser; what Trinity-RFT hands vLLM's OpenAI server as --reasoning-parser):

- `deepseek_r1` (vllm/reasoning/deepseek_r1_reasoning_parser.py): what follows the first `<think>` (the whole reply
  without one: the chat template opened it in the prompt) up to `</think>` is the reasoning, the rest the content; a
  reply without `</think>` is all reasoning (it was cut while thinking);
- `qwen3` (vllm/parser/qwen3.py): the reasoning runs to `</think>` or to a `<tool_call>`, which the content keeps;
  `<think>` is dropped from it and `</think>` from the content; with the chat template's thinking off
  (explorer.rollout_model.enable_thinking: false) the whole reply is the content.

An empty reasoning or content is None, as vLLM returns it (deepseek_r1 keeps an empty reasoning). Both are checked
against vLLM's own parsers on the same replies (tests/runtime/data/test_reasoning.py).
"""

from collections.abc import Callable

START, END, TOOL_CALL = "<think>", "</think>", "<tool_call>"

Split = tuple[str | None, str | None]  # (reasoning, content)


def deepseek_r1(reply: str, thinking: bool) -> Split:
    """vLLM's BaseThinkingReasoningParser.extract_reasoning; it reads no thinking switch."""
    before, start, after = reply.partition(START)
    text = after if start else before
    if END not in text:
        return text, None
    reasoning, _, content = text.partition(END)
    return reasoning, content or None


def qwen3(reply: str, thinking: bool) -> Split:
    """vLLM's Qwen3Parser.extract_reasoning: reasoning first where thinking is on, else content only."""
    if not thinking:
        return None, reply
    ends = [i for i in (reply.find(END), reply.find(TOOL_CALL)) if i >= 0]
    cut = min(ends, default=len(reply))
    rest = reply[cut + len(END) :] if reply.startswith(END, cut) else reply[cut:]
    reasoning, content = reply[:cut].replace(START, ""), rest.replace(END, "")
    return reasoning or None, content or None


FORMATS: dict[str, Callable[[str, bool], Split]] = {"deepseek_r1": deepseek_r1, "qwen3": qwen3}
