"""The reasoning of a chat reply split from its content (explorer.rollout_model.reasoning_parser) as vLLM's parsers of
the same names split it: held to vLLM's own parsers on the same replies where vLLM is installed."""

import importlib.util
import json
import subprocess
import sys
import typing

import pytest

from trinity.config.schema.explorer import ReasoningParser
from trinity.runtime.data import reasoning

REPLIES = [
    "<think>a b</think>\n\nanswer",
    "a b</think>answer",  # the chat template opened <think> in the prompt
    "all thinking",  # cut while thinking
    "<think>x</think>",
    "x<tool_call>{}</tool_call>",
    "pre<think>x</think>y",
    "",
    "a</think>b</think>c",
    "a</think>b<think>c",
    "</think>",
    "<think></think>ans",
    "a<tool_call>x</think>y",
    "  a  </think>  ",
    "<think>\n",
    "a<think>b",
]
SPLITS = {  # (reasoning, content) of each reply, as vLLM 0.31's parsers give them
    "deepseek_r1": [
        ("a b", "\n\nanswer"),
        ("a b", "answer"),
        ("all thinking", None),
        ("x", None),
        ("x<tool_call>{}</tool_call>", None),
        ("x", "y"),
        ("", None),
        ("a", "b</think>c"),
        ("c", None),
        ("", None),
        ("", "ans"),
        ("a<tool_call>x", "y"),
        ("  a  ", "  "),
        ("\n", None),
        ("b", None),
    ],
    "qwen3": [
        ("a b", "\n\nanswer"),
        ("a b", "answer"),
        ("all thinking", None),
        ("x", None),
        ("x", "<tool_call>{}</tool_call>"),
        ("prex", "y"),
        (None, None),
        ("a", "bc"),
        ("a", "b<think>c"),
        (None, None),
        (None, "ans"),
        ("a", "<tool_call>xy"),
        ("  a  ", "  "),
        ("\n", None),
        ("ab", None),
    ],
}


def test_every_format_the_schema_offers_has_a_splitter():
    assert set(typing.get_args(ReasoningParser)) == set(reasoning.FORMATS) == set(SPLITS)


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_a_reply_splits_into_reasoning_and_content(name):
    assert [reasoning.FORMATS[name](reply, True) for reply in REPLIES] == SPLITS[name]


def test_qwen3_with_the_templates_thinking_off_is_all_content_and_deepseek_r1_reads_no_switch():
    assert [reasoning.qwen3(reply, False) for reply in REPLIES] == [(None, reply) for reply in REPLIES]
    assert [reasoning.deepseek_r1(reply, False) for reply in REPLIES] == SPLITS["deepseek_r1"]


# vLLM's parsers run in a process of their own: vLLM imported here would stay in this session's sys.modules, where
# other tests check that trinity's commands never import it
VLLMS_OWN = """
import json, sys
from transformers import AutoTokenizer
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.reasoning import ReasoningParserManager
model, names, replies = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
tokenizer = AutoTokenizer.from_pretrained(model)
tokenizer.add_tokens(["<think>", "</think>", "<tool_call>", "</tool_call>"])
out = {}
for name in names:
    for thinking in (True, False):
        switch = {"chat_template_kwargs": {"enable_thinking": thinking}}
        parser = ReasoningParserManager.get_reasoning_parser(name)(tokenizer, **switch)
        request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "1+1="}], **switch)
        out[f"{name} {thinking}"] = [list(parser.extract_reasoning(reply, request)) for reply in replies]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def vllms_splits(demo_assets):
    args = [str(demo_assets / "model"), json.dumps(sorted(SPLITS)), json.dumps(REPLIES)]
    proc = subprocess.run([sys.executable, "-c", VLLMS_OWN, *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.vllm
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")
@pytest.mark.parametrize("name", sorted(SPLITS))
@pytest.mark.parametrize("thinking", [True, False])
def test_the_splits_are_vllms_own(vllms_splits, name, thinking):
    """vLLM's parser of the name, over a tokenizer that has the think and tool-call tokens (as Qwen's and DeepSeek's
    have), gives what trinity's endpoint gives on every reply."""
    ours = [list(reasoning.FORMATS[name](reply, thinking)) for reply in REPLIES]
    assert ours == vllms_splits[f"{name} {thinking}"]
