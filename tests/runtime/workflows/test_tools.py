"""Tool calls parsed from replies (hermes, brackets), the toolbox's answers and errors, the calculator, tools rendered
by a chat template, calculator_workflow's episodes token by token, and SFT conversations that train every turn."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.runtime.workflows.test_conversation import ids, reply
from trinity.config.schema.buffer import FormatConfig
from trinity.runtime.data.tool_calls import ToolCall, ToolCallError, brackets, hermes, parser
from trinity.runtime.workflows import Task, load
from trinity.runtime.workflows.calculator import calculate
from trinity.runtime.workflows.conversation import ChatTemplate, Conversation
from trinity.runtime.workflows.toolbox import Toolbox

# the tool example's template (examples/arith_tools): a tool's result after "="
TOOLS = (
    "{% for m in messages %}{% if m['role'] == 'tool' %}={% endif %}{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}<eos>{% endif %}{% endfor %}"
)


def test_hermes_calls_are_json_in_tags_and_a_reply_without_one_is_an_answer():
    reply_text = 'Let me add.<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    assert hermes(reply_text, ["add"]) == [ToolCall("add", {"a": 1, "b": 2})]
    two = '<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call><tool_call>{"name": "g"}</tool_call>'
    assert hermes(two, []) == [ToolCall("f", {"x": 1}), ToolCall("g", {})]  # arguments as a JSON string too
    assert hermes("The answer is 3.", ["add"]) == []


@pytest.mark.parametrize(
    "text, message",
    [
        ('<tool_call>{"name": "add", "arguments": {"a": 1}', "not closed with </tool_call>"),
        ("<tool_call>{name: add}</tool_call>", r"not JSON \(Expecting property name enclosed in double quotes"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'needs {"name": ..., "arguments": {...}}'),
        ('<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>', "'add': its arguments are not a JSON object"),
    ],
)
def test_a_hermes_call_that_does_not_parse_says_why(text, message):
    with pytest.raises(ToolCallError, match=message):
        hermes(text, ["add"])


def test_brackets_call_the_only_tool_with_the_text_between():
    assert brackets("[12+34]", ["calculate"]) == [ToolCall("calculate", text="12+34")]
    assert brackets("46", ["calculate"]) == []
    with pytest.raises(ToolCallError, match="not closed with ]"):
        brackets("[12+3", ["calculate"])
    with pytest.raises(ToolCallError, match="calls a toolbox's only tool; this one has 2"):
        brackets("[1]", ["a", "b"])
    with pytest.raises(ValueError, match="unknown tool-call format 'json'; known: hermes, brackets"):
        parser("json")


def add(a: int, b: int = 0) -> int:
    """Add two numbers.

    More words the schema leaves out."""
    return a + b


def test_the_toolbox_answers_each_call_and_turns_every_failure_into_the_tools_reply():
    box = Toolbox({"add": add, "calculate": calculate})
    call = '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>'
    assert box.respond(call) == [{"role": "tool", "name": "add", "content": "5"}]
    assert box.respond("5") is None  # no call: the answer
    unknown = box.respond('<tool_call>{"name": "mul", "arguments": {}}</tool_call>')
    assert unknown == [{"role": "tool", "name": "mul", "content": "error: unknown tool 'mul' (tools: add, calculate)"}]
    (wrong,) = box.respond('<tool_call>{"name": "add", "arguments": {"c": 1}}</tool_call>')
    assert wrong["content"] == "error: tool 'add': missing a required argument: 'a'"
    (raised,) = box.respond('<tool_call>{"name": "calculate", "arguments": {"expression": "1/0"}}</tool_call>')
    assert raised["content"] == "error: ZeroDivisionError: integer division or modulo by zero"
    (unparsed,) = box.respond("<tool_call>{oops}</tool_call>")
    assert unparsed["role"] == "tool" and unparsed["content"].startswith("error: a tool call is not JSON")
    assert (box.calls, box.errors) == (5, 4)


def test_a_function_becomes_an_openai_schema():
    (schema,) = Toolbox({"add": add}).schemas()
    assert schema == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a"],
            },
        },
    }


@given(st.lists(st.integers(-999, 999), min_size=1, max_size=5), st.lists(st.sampled_from("+-*"), max_size=4))
def test_the_calculator_agrees_with_python_on_integer_arithmetic(numbers, operators):
    expression = str(numbers[0]) + "".join(f"{op}({n})" for op, n in zip(operators, numbers[1:]))
    assert calculate(expression) == eval(expression)  # noqa: S307 (the reference: whole numbers and + - * only)


@pytest.mark.parametrize(
    "text, message",
    [
        ("__import__('os')", "only whole numbers, \\+ - \\* / and parentheses"),
        ("1.5+1", "only whole numbers"),
        ("12+", "not an arithmetic expression"),
        ("9**9", "only whole numbers"),
        ("(10*10000000000)*(10*10000000000)*(10*10000000000)", "more than 30 digits"),
    ],
)
def test_the_calculator_refuses_what_is_not_integer_arithmetic(text, message):
    with pytest.raises(ValueError, match=message):
        calculate(text)


def test_tools_reach_the_chat_template(demo_assets):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(demo_assets / "model-tools")
    listing = (
        "{% for t in tools %}{{ t.function.name }}{% endfor %}{% for m in messages %}{{ m['content'] }}{% endfor %}"
    )
    template = ChatTemplate(tokenizer, listing, tools=Toolbox({"add": add}).schemas())
    assert template.render([{"role": "user", "content": "1+2="}], generation_prompt=True) == "add1+2="


@pytest.fixture(scope="module")
def tool_tokenizer(demo_assets):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(demo_assets / "model-tools")


class Scripted:
    """Stands in for the rollout engines with scripted replies, one script per episode in the order they open; the
    conversations, the toolbox and the calculator are the real ones."""

    def __init__(self, tokenizer, scripts):
        self.tokenizer, self.scripts, self.opened, self.tools = tokenizer, scripts, {}, None

    def conversation(self, task, messages=None, tools=None):
        self.tools = tools
        talk = Conversation(ChatTemplate(self.tokenizer, TOOLS), [{"role": "user", "content": task.row["prompt"]}], 32)
        self.opened[id(talk)] = list(self.scripts[len(self.opened)])
        return talk

    def reply(self, conversations):
        for talk in conversations:
            reply(talk, self.tokenizer, self.opened[id(talk)].pop(0))


def test_calculator_episodes_token_by_token(tool_tokenizer):
    """Answered at once (wrong), answered after a call, a call that does not close then an answer, no answer."""
    fmt = FormatConfig(prompt_type="plaintext", prompt_key="prompt", response_key="response")
    task = Task("t/0", {"prompt": "12+34+56=", "response": "102"}, fmt, 4, {"tool_call_format": "brackets"})
    scripts = [["101"], ["[12+34+56]", "102"], ["[12+3", "102"], ["[1]", "[2]", "[3]"]]
    model = Scripted(tool_tokenizer, scripts)
    at_once, called, broken, endless = load("calculator_workflow")(task, model).run()
    assert model.tools[0]["function"]["name"] == "calculate"  # the schema goes to the template
    assert [e.reward for e in (at_once, called, broken, endless)] == [0.0, 1.0, 1.0, 0.0]
    assert [e.metrics["tool_calls"] for e in (at_once, called, broken, endless)] == [0.0, 1.0, 1.0, 2.0]
    assert [e.metrics["tool_errors"] for e in (at_once, called, broken, endless)] == [0.0, 0.0, 1.0, 0.0]
    pairs = lambda e: "".join(  # noqa: E731
        tok if m else f"({tok})" for tok, m in zip(tool_tokenizer.convert_ids_to_tokens(e.response_ids), e.action_mask)
    )
    assert pairs(at_once) == "101<eos>"
    assert pairs(called) == "[12+34+56]<eos>(=)(1)(0)(2)102<eos>"
    assert pairs(broken).startswith("[12+3<eos>(=)") and pairs(broken).endswith("102<eos>")
    assert pairs(endless) == "[1]<eos>(=)(1)[2]<eos>(=)(2)[3]<eos>"  # the third call is not run: turns ran out


def test_an_sft_conversation_trains_every_assistant_turn(tool_tokenizer):
    from trinity.runtime.buffer.stores import DataSet

    row = {
        "messages": [
            {"role": "user", "content": "12+34+56="},
            {"role": "assistant", "content": "[12+34+56]"},
            {"role": "tool", "content": "102"},
            {"role": "assistant", "content": "102"},
        ]
    }
    every = FormatConfig(prompt_type="messages", messages_key="messages", enable_concatenated_multi_turn=True)
    (exp,) = DataSet([row], every, tool_tokenizer, template=TOOLS).samples[0]
    assert exp.prompt_ids == ids(tool_tokenizer, "12+34+56=")
    tokens = tool_tokenizer.convert_ids_to_tokens(exp.response_ids)
    assert (
        "".join(t if m else f"({t})" for t, m in zip(tokens, exp.action_mask)) == "[12+34+56]<eos>(=)(1)(0)(2)102<eos>"
    )
    (last,) = DataSet(
        [row], every.model_copy(update={"enable_concatenated_multi_turn": False}), tool_tokenizer, template=TOOLS
    ).samples[0]
    assert last.action_mask is None and tool_tokenizer.decode(last.response_ids) == "102<eos>"  # the last turn alone
    assert json.loads(exp.to_json())["action_mask"] == exp.action_mask


def test_calculator_workflow_reads_its_arguments():
    from trinity.runtime.workflows.base import check_args

    calculator = load("calculator_workflow")
    assert calculator.arguments == {"max_turns": 3, "tool_call_format": "hermes"}
    with pytest.raises(ValueError, match=r"'tools': no workflow of it reads them \(CalculatorWorkflow reads max_turns"):
        check_args([calculator], {"tools": []})
    with pytest.raises(ValueError, match="unknown tool-call format 'json'; known: hermes, brackets"):
        check_args([calculator], {"tool_call_format": "json"})


def test_a_reply_that_tries_a_call_is_not_an_answer():
    box = Toolbox({"calculate": calculate}, "brackets")
    assert box.calls_in("[1+2]") and box.calls_in("[1+2") and not box.calls_in("3")
    assert (box.calls, box.errors) == (0, 0)  # looking runs nothing


def test_a_rows_tools_are_a_list_of_schemas_or_that_list_as_json():
    from trinity.runtime.data.prompts import FormatError, tools_of

    fmt = FormatConfig()
    schema = {"type": "function", "function": {"name": "add"}}
    assert tools_of({"tools": [schema]}, fmt) == tools_of({"tools": json.dumps([schema])}, fmt) == [schema]
    assert tools_of({"prompt": "1+2="}, fmt) is None
    with pytest.raises(FormatError, match="column 'tools' holds dict, not a list of tool schemas"):
        tools_of({"tools": schema}, fmt)
    with pytest.raises(FormatError, match="column 'tools' holds text that is not JSON"):
        tools_of({"tools": "[{"}, fmt)


def test_sft_conversations_with_structured_tool_calls_or_odd_messages_are_refused(tool_tokenizer):
    from trinity.runtime.buffer.stores import DataSet
    from trinity.runtime.data.prompts import FormatError

    every = FormatConfig(prompt_type="messages", messages_key="messages", enable_concatenated_multi_turn=True)
    structured = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "add"}}]}
    with pytest.raises(FormatError, match="structured tool_calls are not trained yet"):
        DataSet(
            [{"messages": [{"role": "user", "content": "1+2="}, structured]}], every, tool_tokenizer, template=TOOLS
        )
    with pytest.raises(FormatError, match="holds 'hi' where a message"):
        DataSet([{"messages": ["hi"]}], every, tool_tokenizer, template=TOOLS)


def test_multi_turn_sft_is_refused_where_there_are_no_turns_to_train(tool_tokenizer):
    from trinity.runtime.buffer.stores import DataSet
    from trinity.runtime.data.prompts import FormatError

    every = FormatConfig(prompt_type="plaintext", enable_concatenated_multi_turn=True)
    with pytest.raises(ValueError, match="this is a sft data set of plaintext rows: set prompt_type: messages"):
        DataSet([{"prompt": "1+2=", "response": "3"}], every, tool_tokenizer, template=TOOLS)
    pairs = FormatConfig(enable_concatenated_multi_turn=True)
    with pytest.raises(ValueError, match="this is a pairs data set of messages rows"):
        DataSet([{"prompt": "1", "chosen": "2", "rejected": "3"}], pairs, tool_tokenizer, template=TOOLS, data="pairs")
    no_turn = FormatConfig(messages_key="messages", enable_concatenated_multi_turn=True)
    with pytest.raises(FormatError, match="holds a conversation with no assistant turn to train"):
        DataSet([{"messages": [{"role": "user", "content": "1+2="}]}], no_turn, tool_tokenizer, template=TOOLS)
