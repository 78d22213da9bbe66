"""Tasksets from local JSONL, JSON, Parquet and `datasets` folders; prompts and SFT pairs from rows."""

import json

import pytest

from trinity.config.schema.buffer import FormatConfig
from trinity.runtime.data.prompts import FormatError, check_columns, prompt_text, sft_pair
from trinity.runtime.data.tasksets import DataError, SplitError, first_row, load_rows

ROWS = [{"question": "1+1?", "answer": "#### 2"}, {"question": "2+2?", "answer": "#### 4"}]


def test_jsonl_json_and_parquet_by_split(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "test.json").write_text(json.dumps({"question": ["3+3?"], "answer": ["#### 6"]}))  # column layout
    pq.write_table(pa.Table.from_pylist(ROWS[:1]), tmp_path / "validation-00000.parquet")
    assert load_rows(str(tmp_path), "train") == ROWS
    assert load_rows(str(tmp_path), "test") == [{"question": "3+3?", "answer": "#### 6"}]
    assert load_rows(str(tmp_path), "validation") == ROWS[:1]
    assert load_rows(str(tmp_path / "train.jsonl")) == ROWS  # a file is read whatever the split


def test_subset_folder_and_missing_split(tmp_path):
    (tmp_path / "main").mkdir()
    (tmp_path / "main" / "train.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    assert load_rows(str(tmp_path), "train", subset="main") == ROWS[:1]
    with pytest.raises(DataError, match=r"no file for split 'test'.*data files here: train.jsonl"):
        load_rows(str(tmp_path / "main"), "test")
    with pytest.raises(DataError, match="no such file or folder"):
        load_rows(str(tmp_path / "absent"))


def test_a_datasets_folder_saved_with_save_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS), "test": datasets.Dataset.from_list(ROWS[1:])}
    ).save_to_disk(str(tmp_path / "gsm8k"))
    assert load_rows(str(tmp_path / "gsm8k"), "test") == ROWS[1:]
    with pytest.raises(DataError, match="no split 'dev'; splits: train, test"):
        load_rows(str(tmp_path / "gsm8k"), "dev")


def test_the_first_row_is_the_first_that_load_rows_reads_in_every_format(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "train.jsonl").write_text("\n" + "".join(json.dumps(r) + "\n" for r in ROWS))  # a blank line first
    (tmp_path / "test.json").write_text(json.dumps({"question": ["3+3?"], "answer": ["#### 6"]}))
    pq.write_table(pa.Table.from_pylist(ROWS[::-1]), tmp_path / "validation-00000.parquet")
    for split in ("train", "test", "validation"):
        assert first_row(str(tmp_path), split) == load_rows(str(tmp_path), split)[0]


def test_a_datasets_folder_has_no_first_row_before_setup(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "saved"))
    assert first_row(str(tmp_path / "saved")) is None


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("empty.jsonl", "\n\n", "no rows"),
        ("empty.json", "[]", "no rows"),
        ("broken.jsonl", '{"q": [}\n', "not readable as jsonl: Expecting value: line 1 column 8 (char 7)"),
        ("broken.parquet", "nope", "not readable as parquet: "),
        ("scalar.json", '{"q": 1}', "not readable as json: 'int' object is not iterable"),
        ("lists.jsonl", "[1, 2]\n", "rows are list, not objects with named columns"),
        ("nulls.jsonl", "null\n", "rows are NoneType, not objects with named columns"),
        ("empty.csv", "q,a\n", "no rows"),
        ("rows.txt", "q\n", "unsupported file type '.txt'; use .parquet, .jsonl, .json, .csv or a datasets folder"),
    ],
)
def test_a_data_set_without_a_first_row_to_read_is_a_data_error_naming_its_file_once(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(DataError) as err:
        first_row(str(tmp_path / name))
    assert str(err.value).startswith(f"{tmp_path / name}: {message}") and str(err.value).count(name) == 1


def test_a_split_without_a_file_is_a_split_error(tmp_path):
    (tmp_path / "train.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    with pytest.raises(SplitError, match="no file for split 'test'"):
        first_row(str(tmp_path), "test")


class PlainTokenizer:
    """No chat template: messages are joined (the demo's tokenizer is like this)."""

    chat_template = None


def test_plaintext_prompt_with_system_prompt_and_reply_prefix():
    fmt = FormatConfig(
        prompt_type="plaintext", prompt_key="question", system_prompt="Answer briefly.", reply_prefix="A:"
    )
    assert prompt_text(ROWS[0], fmt, PlainTokenizer()) == "Answer briefly.\n1+1?A:"


def test_messages_go_through_the_chat_template():
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models

    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    )
    tokenizer.chat_template = (
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if "
        "add_generation_prompt %}<assistant>{% endif %}"
    )
    fmt = FormatConfig(prompt_type="messages", prompt_key="question", system_prompt="Be exact.")
    assert prompt_text(ROWS[0], fmt, tokenizer) == "<system>Be exact.<user>1+1?<assistant>"
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    assert sft_pair(chat, FormatConfig(prompt_type="messages", messages_key="messages"), tokenizer) == (
        "<user>hi<assistant>",
        "hello",
    )


def test_a_data_sets_template_beats_the_models_which_beats_the_tokenizers():
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models

    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    )
    tokenizer.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
    model = (
        "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt "
        "%}[assistant] {% endif %}"
    )
    own = FormatConfig(prompt_type="messages", prompt_key="question", chat_template="Q: {{ messages[-1].content }} A:")
    assert prompt_text(ROWS[0], FormatConfig(prompt_type="messages", prompt_key="question"), tokenizer) == "<user>1+1?"
    assert (
        prompt_text(ROWS[0], FormatConfig(prompt_type="messages", prompt_key="question"), tokenizer, template=model)
        == "[user] 1+1?\n[assistant] "
    )
    assert prompt_text(ROWS[0], own, tokenizer, template=model) == "Q: 1+1? A:"
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    assert sft_pair(chat, FormatConfig(prompt_type="messages", messages_key="messages"), tokenizer, model) == (
        "[user] hi\n[assistant] ",
        "hello",
    )
    tokenizer.chat_template = None  # like the demo's: a given template still applies
    assert (
        prompt_text(ROWS[0], FormatConfig(prompt_type="messages", prompt_key="question"), tokenizer, template=model)
        == "[user] 1+1?\n[assistant] "
    )


def test_a_rows_own_system_prompt_wins_over_the_tasksets():
    fmt = FormatConfig(
        prompt_type="plaintext", prompt_key="question", system_prompt="Answer briefly.", system_prompt_key="sys"
    )
    assert prompt_text({"question": "1+1?", "sys": "Show your work."}, fmt, PlainTokenizer()) == "Show your work.\n1+1?"
    # an empty one: the taskset's
    assert prompt_text({"question": "1+1?", "sys": ""}, fmt, PlainTokenizer()) == "Answer briefly.\n1+1?"
    chat = FormatConfig(prompt_type="messages", prompt_key="question", system_prompt_key="sys")
    # messages, joined without a template
    assert prompt_text({"question": "1+1?", "sys": "Be exact."}, chat, PlainTokenizer()) == "Be exact.\n1+1?"
    assert sft_pair(
        {"question": "1+1?", "answer": "2", "sys": "Be exact."},
        chat.model_copy(update={"response_key": "answer"}),
        PlainTokenizer(),
    ) == ("Be exact.\n1+1?", "2")


def test_a_missing_column_names_the_columns_there_are():
    with pytest.raises(FormatError, match="row has no column 'prompt' \\(columns: question, answer\\)"):
        prompt_text(ROWS[0], FormatConfig(), PlainTokenizer())


@pytest.mark.parametrize("key", ["system_prompt_key", "workflow_key", "reward_fn_key"])
def test_a_format_column_the_rows_lack_fails_at_setup(key):
    with pytest.raises(
        ValueError, match=f"taskset mixed: rows have no column 'sys' \\(columns: prompt\\); set its format.{key}"
    ):
        check_columns("taskset mixed", FormatConfig(**{key: "sys"}), {"prompt": "1+1="})


@pytest.mark.parametrize("key", ["workflow_key", "reward_fn_key"])
def test_a_trainers_data_set_needs_no_workflow_or_reward_column(key):
    check_columns("data set sft", FormatConfig(**{key: "sys"}), {"prompt": "1+1=", "response": "2"}, "sft")


@pytest.mark.parametrize(
    "fmt,column,key",
    [
        ({"response_key": "answer"}, "answer", "response_key"),
        ({"system_prompt_key": "sys"}, "sys", "system_prompt_key"),
    ],
)
def test_an_sft_data_set_needs_its_response_and_system_columns(fmt, column, key):
    row = {"prompt": "1+1=", "response": "2"}
    check_columns("data set sft", FormatConfig(), row, "sft")
    with pytest.raises(
        ValueError,
        match=f"data set sft: rows have no column '{column}' \\(columns: prompt, response\\); set its format.{key}",
    ):
        check_columns("data set sft", FormatConfig(**fmt), row, "sft")
    if key == "response_key":
        check_columns("taskset t", FormatConfig(**fmt), row)  # a taskset's reference is the workflow's business


def test_messages_rows_need_no_prompt_or_response_column():
    check_columns(
        "data set chat", FormatConfig(prompt_type="messages", messages_key="messages"), {"messages": []}, "sft"
    )
