"""Rows to prompts and SFT samples, by the taskset's `format` keys and a chat template: the data set's
own (`format.chat_template`), else the model's (`template`), else the tokenizer's."""

from typing import Any


class FormatError(KeyError):
    """A row lacks a column the format names."""


# the columns a data set's rows need beyond the prompt, by what the trainer reads (config/algorithms/presets.py data)
DATA_COLUMNS = {"sft": ("response_key",), "pairs": ("chosen_key", "rejected_key"), "text": ()}


def check_columns(what: str, fmt: Any, row: dict, data: str = "rollouts", prompt: bool = True) -> None:
    """A data set whose format names a column its rows lack fails at setup, not row by row; row 0 stands for all.
    `data` is what the rows feed: rollouts (a taskset), or a trainer's sft samples, pairs or text; `prompt`: whether
    its workflow reads the prompt column."""
    missing = missing_columns(fmt, row, data, prompt)
    if missing:
        column, key = missing[0]
        raise ValueError(f"{what}: {no_column(column, row)}; set its format.{key}")


def missing_columns(fmt: Any, row: dict, data: str = "rollouts", prompt: bool = True) -> list[tuple[str, str]]:
    """(column, the format key naming it) for each column the format names that `row` lacks (`prompt`: whether its
    workflow reads the prompt column: config/workflows.py OWN_PROMPTS build theirs)."""
    by_messages = fmt.prompt_type != "plaintext" and fmt.messages_key in row
    wanted = {} if by_messages or not prompt else {fmt.prompt_key: "prompt_key"}
    if not (by_messages and data == "sft"):  # an SFT conversation's last assistant message is its response
        wanted |= {getattr(fmt, key): key for key in DATA_COLUMNS.get(data, ())}
    wanted |= {fmt.system_prompt_key: "system_prompt_key"}
    if data == "rollouts":  # a task's own workflow and reward; a trainer's data set has neither
        wanted |= {fmt.workflow_key: "workflow_key", fmt.reward_fn_key: "reward_fn_key"}
    return [(column, key) for column, key in wanted.items() if column and column not in row]


def no_column(column: str, row: dict) -> str:
    """What is wrong with rows that lack `column`."""
    return f"rows have no column {column!r} (columns: {', '.join(map(str, row))})"


def prompt_text(
    row: dict, fmt: Any, tokenizer: Any, enable_thinking: bool | None = False, template: str | None = None
) -> str:
    """The text the model continues: plaintext as written, messages through the chat template."""
    if fmt.prompt_type == "plaintext":
        body, system = _column(row, fmt.prompt_key), _system(row, fmt)
        text = f"{system}\n{body}" if system else str(body)
    else:
        text = _chat(
            _prompt_messages(row, fmt), tokenizer, enable_thinking, template_of(fmt, template), tools_of(row, fmt)
        )
    return text + (fmt.reply_prefix or "")


def prompt_messages(row: dict, fmt: Any) -> list[dict]:
    """A task's opening messages: a plaintext prompt as one user message, after the system prompt when it has one."""
    if fmt.prompt_type == "plaintext":
        return _with_system([{"role": "user", "content": str(_column(row, fmt.prompt_key))}], _system(row, fmt))
    return _prompt_messages(row, fmt)


def sft_pair(row: dict, fmt: Any, tokenizer: Any, template: str | None = None) -> tuple[str, str]:
    """(prompt, response) of one SFT sample: the last assistant message is the response; the chat template renders
    with the data set's format.enable_thinking (Trinity-RFT's SFTFormatter)."""
    if fmt.prompt_type == "plaintext":
        return prompt_text(row, fmt, tokenizer), str(_column(row, fmt.response_key))
    messages = _column(row, fmt.messages_key) if fmt.messages_key in row else None
    if messages and messages[-1].get("role") == "assistant":
        history = _with_system(messages[:-1], _system(row, fmt))
        prompt = _chat(history, tokenizer, fmt.enable_thinking, template_of(fmt, template), tools_of(row, fmt))
        return prompt + (fmt.reply_prefix or ""), messages[-1]["content"]
    return prompt_text(row, fmt, tokenizer, fmt.enable_thinking, template), str(_column(row, fmt.response_key))


def sft_turns(row: dict, fmt: Any) -> tuple[list[dict], list[tuple[str, list[dict]]]]:
    """An SFT conversation's (messages before its first assistant turn, [(each assistant turn's text, the messages
    after it)]), for training every assistant turn (format.enable_concatenated_multi_turn)."""
    messages = _with_system(list(_column(row, fmt.messages_key)), _system(row, fmt))
    for message in messages:
        if not isinstance(message, dict):
            raise FormatError(f"column {fmt.messages_key!r} holds {message!r} where a message (role, content) goes")
        if message.get("role") == "assistant" and message.get("tool_calls"):
            raise FormatError(
                f"column {fmt.messages_key!r}: an assistant message's structured tool_calls are not trained yet; write "
                "the call in the reply's content, in the format the chat template teaches"
            )
    first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), None)
    if first is None:
        raise FormatError(f"column {fmt.messages_key!r} holds a conversation with no assistant turn to train")
    turns: list[tuple[str, list[dict]]] = []
    for message in messages[first:]:
        if message.get("role") == "assistant":
            turns.append((str(message.get("content") or ""), []))
        else:
            turns[-1][1].append(message)
    return messages[:first], turns


def dpo_triple(row: dict, fmt: Any, tokenizer: Any, template: str | None = None) -> tuple[str, str, str]:
    """(prompt, chosen, rejected) of one preference pair: the prompt as a taskset's; each response a string, or
    assistant messages whose last one is the response (Trinity-RFT's messages layout)."""
    prompt = prompt_text(row, fmt, tokenizer, fmt.enable_thinking, template)
    return prompt, _reply(_column(row, fmt.chosen_key)), _reply(_column(row, fmt.rejected_key))


def _reply(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        return str(value[-1].get("content", ""))
    return str(value)


def _prompt_messages(row: dict, fmt: Any) -> list[dict]:
    if fmt.messages_key in row:
        messages = list(row[fmt.messages_key])
        if messages and messages[-1].get("role") == "assistant":
            messages = messages[:-1]  # the reference answer is not part of the prompt
    else:
        messages = [{"role": "user", "content": str(_column(row, fmt.prompt_key))}]
    return _with_system(messages, _system(row, fmt))


def template_of(fmt: Any, model_template: str | None) -> str | None:
    """The data set's own chat template, else the model's (None: the tokenizer's)."""
    return fmt.chat_template if fmt.chat_template is not None else model_template


def _system(row: dict, fmt: Any) -> str | None:
    """The row's own system prompt (format.system_prompt_key) when it has one, else the taskset's."""
    own = row.get(fmt.system_prompt_key) if fmt.system_prompt_key else None
    return str(own) if own else fmt.system_prompt


def _with_system(messages: list[dict], system: str | None) -> list[dict]:
    if system and not (messages and messages[0].get("role") == "system"):
        return [{"role": "system", "content": system}, *messages]
    return messages


def tools_of(row: dict, fmt: Any) -> list[dict] | None:
    """The row's tools (OpenAI function schemas) in its format.tools_key column; None when it has none."""
    tools = row.get(fmt.tools_key)
    if tools is None:
        return None
    if isinstance(tools, str):  # a JSON column, as some data sets store it
        import json

        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise FormatError(f"column {fmt.tools_key!r} holds text that is not JSON ({exc.msg})") from None
    if not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise FormatError(f"column {fmt.tools_key!r} holds {type(tools).__name__}, not a list of tool schemas")
    return tools


def _chat(
    messages: list[dict], tokenizer: Any, enable_thinking: bool | None, template: str | None, tools: list | None = None
) -> str:
    if template is not None or getattr(tokenizer, "chat_template", None):
        return render_chat(tokenizer, messages, template, enable_thinking, tools, generation_prompt=True)
    return "\n".join(m["content"] for m in messages)  # a tokenizer without a template: the contents, in order


def render_chat(
    tokenizer: Any,
    messages: list[dict],
    template: str | None,
    enable_thinking: bool | None,
    tools: list | None,
    generation_prompt: bool,
) -> str:
    """`messages` as the chat template (`template`, else the tokenizer's) writes them, with `tools` rendered in."""
    return tokenizer.apply_chat_template(
        messages,
        chat_template=template,
        tokenize=False,
        add_generation_prompt=generation_prompt,
        enable_thinking=enable_thinking,
        **({"tools": tools} if tools else {}),
    )


def _column(row: dict, key: str) -> Any:
    if key not in row:
        raise FormatError(
            f"row has no column {key!r} (columns: {', '.join(map(str, row))}); set the taskset's format keys"
        )
    return row[key]
