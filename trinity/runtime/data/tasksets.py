"""Rows of a local data set: JSONL, JSON, Parquet, or a folder saved by `datasets` (save_to_disk).

Nothing is downloaded: a run reads what is on disk, on every node, the same way. `split` and
`subset_name` pick the file or the `datasets` split inside a folder.
"""

import json
from pathlib import Path

SUFFIXES = (".jsonl", ".json", ".parquet")


class DataError(ValueError):
    """A data set that cannot be read as asked; the message says what was looked for."""


def load_rows(path: str, split: str = "train", subset: str | None = None) -> list[dict]:
    """Every row of the data set at `path`, as plain dicts."""
    source = Path(path)
    if subset and source.is_dir() and (source / subset).exists():
        source = source / subset
    if source.is_file():
        return _read_file(source)
    if not source.is_dir():
        raise DataError(f"{path}: no such file or folder")
    if (source / "dataset_dict.json").exists() or (source / "dataset_info.json").exists():
        return _read_saved(source, split)
    return _read_file(_split_file(source, split))


def _split_file(folder: Path, split: str) -> Path:
    candidates = [
        p
        for p in sorted(folder.iterdir())
        if p.suffix in SUFFIXES and (p.stem == split or p.stem.startswith(f"{split}-"))
    ]
    if not candidates:
        found = ", ".join(p.name for p in sorted(folder.iterdir()) if p.suffix in SUFFIXES) or "none"
        raise DataError(
            f"{folder}: no file for split {split!r} ({split}.jsonl, {split}.json or {split}.parquet); data files "
            f"here: {found}"
        )
    return candidates[0]


def _read_file(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, list) else _columns_to_rows(data)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raise DataError(f"{path}: unsupported file type {path.suffix!r}; use {', '.join(SUFFIXES)} or a datasets folder")


def _columns_to_rows(data: dict) -> list[dict]:
    columns = list(data)
    return [dict(zip(columns, values)) for values in zip(*data.values())]


def _read_saved(folder: Path, split: str) -> list[dict]:
    import datasets

    saved = datasets.load_from_disk(str(folder))
    if isinstance(saved, datasets.DatasetDict):
        if split not in saved:
            raise DataError(f"{folder}: no split {split!r}; splits: {', '.join(saved)}")
        saved = saved[split]
    return saved.to_list()
