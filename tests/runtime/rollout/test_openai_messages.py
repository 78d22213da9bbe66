"""The assistant message of the engines' OpenAI endpoint, over HTTP with the real `openai` package: a reply's tool
calls read in tool_call_parser's format (with auto tool choice, as vLLM's flag), its reasoning split off as
reasoning_parser says."""

import json

import pytest

torch = pytest.importorskip("torch")
openai = pytest.importorskip("openai")

from tests.runtime.rollout.test_openai_api import CALCULATE, client, config_of, serve, with_rollout  # noqa: E402
from trinity.runtime.rollout.openai_messages import reply_message, tool_calls  # noqa: E402
from trinity.runtime.rollout.transformers_engine import TransformersEngine  # noqa: E402


def test_tool_calls_are_read_in_the_format_and_a_call_that_does_not_parse_is_text():
    [call] = tool_calls("[12+34]", "brackets", CALCULATE)
    assert call["type"] == "function" and call["function"] == {
        "name": "calculate",
        "arguments": '{"expression": "12+34"}',
    }
    hermes = '<tool_call>{"name": "calculate", "arguments": {"expression": "1+2"}}</tool_call>'
    assert json.loads(tool_calls(hermes, "hermes", CALCULATE)[0]["function"]["arguments"]) == {"expression": "1+2"}
    assert tool_calls("[12+3", "brackets", CALCULATE) == []  # not closed: the agent reads it as the answer
    assert tool_calls("46", "brackets", CALCULATE) == [] and tool_calls("[1]", None, CALCULATE) == []


@pytest.mark.parametrize("parser,thinking", [("deepseek_r1", "true"), ("qwen3", "true"), ("qwen3", "false")])
def test_a_chat_reply_is_split_into_reasoning_and_content_as_the_parser_says(
    demo_assets, monkeypatch, parser, thinking
):
    from trinity.runtime.data import reasoning

    overrides = (f"explorer.rollout_model.reasoning_parser={parser}", f"model.enable_thinking={thinking}")
    engine = TransformersEngine(
        name="rollout.engine0", role="rollout", config=config_of(demo_assets, monkeypatch, *overrides), index=0
    )

    async def body(url):
        api = client(url)
        name = (await api.models.list()).data[0].id
        return await api.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "12+3="}], extra_body={"return_token_ids": True}
        )

    answer = serve(engine, demo_assets / "model-tools", body)
    choice = answer.choices[0]
    text = engine.tokenizer.decode(choice.model_extra["token_ids"], skip_special_tokens=True)
    thought, content = reasoning.FORMATS[parser](text, thinking == "true")
    assert choice.message.content == content
    assert (choice.message.model_extra.get("reasoning"), choice.message.model_extra.get("reasoning_content")) == (
        thought,
        thought,
    )
    assert thinking == "false" or thought is not None  # a reply with no </think> is all reasoning


def test_tools_without_auto_tool_choice_are_refused_unless_the_request_says_none(demo_assets, monkeypatch):
    """As vLLM without --enable-auto-tool-choice: a request with tools asks tool_choice auto unless it says none."""
    # validate refuses react_agent_workflow without auto tool choice: the endpoint alone is tested without it
    config = with_rollout(config_of(demo_assets, monkeypatch), enable_auto_tool_choice=False)
    engine = TransformersEngine(name="rollout.engine0", role="rollout", config=config, index=0)
    messages = [{"role": "user", "content": "1+2+3="}]

    async def body(url):
        api, name = client(url), config.explorer.rollout_model.model_path
        with pytest.raises(openai.BadRequestError) as refused:
            await api.chat.completions.create(model=name, messages=messages, tools=CALCULATE)
        shown = await api.chat.completions.create(model=name, messages=messages, tools=CALCULATE, tool_choice="none")
        return refused.value, shown

    refused, shown = serve(engine, demo_assets / "model-tools", body)
    assert 'tool_choice "auto"' in refused.message and "explorer.rollout_model.enable_auto_tool_choice: true" in (
        refused.message
    )
    assert shown.choices[0].message.tool_calls is None


HERMES_CALL = '<tool_call>{"name": "calculate", "arguments": {"expression": "1+2"}}</tool_call>'


@pytest.mark.parametrize(
    "reply,call_format,parser,want_reasoning,want_content,calls",
    [
        ("sum them</think>[12+34]", "brackets", "deepseek_r1", "sum them", None, 1),
        (f"plan{HERMES_CALL}", "hermes", "qwen3", "plan", None, 1),  # qwen3: a call ends the reasoning
        (f"plan{HERMES_CALL}", "hermes", "deepseek_r1", f"plan{HERMES_CALL}", None, 0),  # still thinking: no call
        ("46", "brackets", None, None, "46", 0),  # no parser: the reply is the content
    ],
)
def test_the_reasoning_is_split_off_before_the_calls_are_read_from_the_content(
    reply, call_format, parser, want_reasoning, want_content, calls
):
    message = reply_message(reply, call_format, CALCULATE, parser, True)
    assert message.get("reasoning") == message.get("reasoning_content") == want_reasoning
    assert message["content"] == want_content and len(message.get("tool_calls", [])) == calls
