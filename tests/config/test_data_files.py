"""A data set folder's subsets and splits, as `datasets.load_dataset(path, subset, split=...)` finds them: the card's
`configs:` first, then datasets' file-name rules in their order; checked against the real `datasets` on each layout."""

import json

import pytest

from tests.hub_standin import GSM8K_CARD, gsm8k_like, parquet
from trinity.config.data_files import (
    SplitError,
    SubsetError,
    card_data,
    folder_layout,
    layout,
    split_files,
)
from trinity.runtime.data.tasksets import first_row, load_rows

ROWS = [{"question": f"{i}+{i}?", "answer": f"#### {2 * i}"} for i in range(6)]
TEST = [{"question": "9+9?", "answer": "#### 18"}]


def plant(folder, files: dict[str, bytes]):
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_the_cards_configs_name_the_subsets_and_every_shard_of_a_split():
    found = layout(gsm8k_like(ROWS, TEST), card_data(GSM8K_CARD))
    assert found.from_card and list(found.subsets) == ["main", "socratic"] and found.default is None
    assert split_files(found, "main", "train", "x") == (
        "main/train-00000-of-00002.parquet",
        "main/train-00001-of-00002.parquet",
    )
    with pytest.raises(SubsetError, match=r"x: no subset 'mian'; its card names main, socratic"):
        split_files(found, "mian", "train", "x")
    with pytest.raises(SubsetError, match="several subsets \\(main, socratic\\) and none is the default"):
        split_files(found, None, "train", "x")
    with pytest.raises(SplitError, match="x: no split 'test' of subset 'socratic'; its card's splits: train"):
        split_files(found, "socratic", "test", "x")


@pytest.mark.parametrize(
    "configs, default",
    [
        ([{"config_name": "only"}], "only"),
        ([{"config_name": "a"}, {"config_name": "default"}], "default"),
        ([{"config_name": "a"}, {"config_name": "b", "default": True}], "b"),
    ],
)
def test_the_default_subset_is_the_marked_one_the_one_named_default_or_the_only_one(configs, default):
    assert layout(["train.jsonl"], {"configs": configs}).default == default


@pytest.mark.parametrize(
    "files, splits",
    [
        (["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet", "data/dev-00000-of-00001.parquet"],
         {"train": 2, "dev": 1}),
        (["train/a.jsonl", "train/b.jsonl", "valid/c.jsonl", "evaluation/d.jsonl"],
         {"train": 2, "validation": 1, "test": 1}),
        (["gsm8k_train.jsonl", "gsm8k-test.jsonl", "notes.md"], {"train": 1, "test": 1}),
        (["rows.jsonl", "more.csv"], {"train": 2}),
        (["README.md", "dataset_infos.json"], {}),
    ],
)  # fmt: skip
def test_without_a_card_the_file_names_say_the_splits_in_datasets_order(files, splits):
    assert {s: len(f) for s, f in layout(files, {}).subsets["default"].items()} == splits


def test_a_split_missing_from_a_folder_names_the_splits_and_files_there():
    found = layout(["train.jsonl", "extra/train-2.jsonl"], {})
    with pytest.raises(SplitError, match=r"here: no file for split 'test' .*splits: train; data files here: "):
        split_files(found, None, "test", "here")


LAYOUTS = {
    "gsm8k card, main train": (gsm8k_like(ROWS, TEST), "main", "train"),
    "gsm8k card, main test": (gsm8k_like(ROWS, TEST), "main", "test"),
    "gsm8k card, socratic": (gsm8k_like(ROWS, TEST), "socratic", "train"),
    "shards under data/": (
        {
            "data/train-00000-of-00002.parquet": parquet(ROWS[:3]),
            "data/train-00001-of-00002.parquet": parquet(ROWS[3:]),
        },
        None,
        "train",
    ),
    "split folders": ({"train/x.jsonl": jsonl(ROWS), "test/y.jsonl": jsonl(TEST)}, None, "test"),
    "split in the file name": ({"q_train.jsonl": jsonl(ROWS), "q_test.jsonl": jsonl(TEST)}, None, "train"),
    "one csv is train": ({"rows.csv": b"question,answer\n1+1?,#### 2\n2+2?,#### 4\n"}, None, "train"),
    "card with data_dir": (
        {
            "README.md": b"---\nconfigs:\n- config_name: en\n  data_dir: en\n- config_name: fr\n  data_dir: fr\n---\n",
            "en/train.jsonl": jsonl(ROWS),
            "fr/train.jsonl": jsonl(TEST),
        },
        "fr",
        "train",
    ),
    "json lines in a .json file": ({"train.json": jsonl(ROWS)}, None, "train"),
}


@pytest.mark.parametrize("case", list(LAYOUTS))
def test_rows_are_the_rows_datasets_load_dataset_reads(tmp_path, case):
    datasets = pytest.importorskip("datasets")
    files, subset, split = LAYOUTS[case]
    folder = plant(tmp_path / "repo", files)
    theirs = datasets.load_dataset(str(folder), subset, split=split, cache_dir=str(tmp_path / "cache")).to_list()
    assert load_rows(str(folder), split, subset) == theirs
    assert first_row(str(folder), split, subset) == theirs[0]


def test_a_subset_folder_without_a_card_is_still_read_and_an_unknown_subset_is_ignored(tmp_path):
    folder = plant(tmp_path / "d", {"main/train.jsonl": jsonl(ROWS), "train.jsonl": jsonl(TEST)})
    assert load_rows(str(folder), "train", "main") == ROWS
    assert load_rows(str(folder), "train", "nothing-called-this") == ROWS + TEST  # every train file, in path order


def test_folder_layout_leaves_hidden_files_out(tmp_path):
    folder = plant(tmp_path / "d", {"train.jsonl": jsonl(ROWS), ".cache/x/train.jsonl": jsonl(TEST)})
    assert folder_layout(folder).subsets == {"default": {"train": ("train.jsonl",)}}
