"""What a value names: a local path always, else a hub repo where it is written as the hub writes repo ids."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trinity.config.hub.names import HubName, hub_name


@pytest.mark.parametrize(
    "value, kind, named",
    [
        ("Qwen/Qwen2.5-1.5B-Instruct", "model", HubName("Qwen/Qwen2.5-1.5B-Instruct", "main", "model")),
        ("openai/gsm8k", "dataset", HubName("openai/gsm8k", "main", "dataset")),
        ("openai/gsm8k@v1.0", "dataset", HubName("openai/gsm8k", "v1.0", "dataset")),
        ("org/m@" + "a" * 40, "model", HubName("org/m", "a" * 40, "model")),
        ("data/train.jsonl", "dataset", None),  # a data file that is not here: a missing local file
        ("data/train.jsonl", "model", HubName("data/train.jsonl", "main", "model")),
        ("./org/name", "model", None),
        ("/models/tiny", "model", None),
        ("m", "model", None),
        ("a/b/c", "model", None),
        ("org--x/name", "model", None),
        ("org/na..me", "model", None),
        ("-org/name", "model", None),
        ("org/name@", "model", HubName("org/name", "main", "model")),
        ("org/name@bad rev", "model", None),
        ("", "model", None),
        (None, "model", None),
    ],
)
def test_what_a_value_names(value, kind, named):
    assert hub_name(value, kind) == named


def test_a_local_path_wins_over_the_hub(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Qwen" / "Qwen2.5-1.5B-Instruct").mkdir(parents=True)
    assert hub_name("Qwen/Qwen2.5-1.5B-Instruct", "model") is None
    assert hub_name("openai/gsm8k", "dataset") == HubName("openai/gsm8k", "main", "dataset")


@given(
    owner=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_]{0,10}", fullmatch=True),
    name=st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True),
)
def test_a_name_reads_back_as_written(owner, name):
    for text in (f"{owner}/{name}", f"{owner}/{name}@v2"):
        assert hub_name(text, "model").text == text
