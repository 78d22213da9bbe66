"""Rows of a local data set: JSONL, JSON, Parquet, or a folder saved by `datasets` (save_to_disk).

Nothing is downloaded: a run reads what is on disk, on every node, the same way. `split` and
`subset_name` pick the file or the `datasets` split inside a folder.
"""

import json
from pathlib import Path

SUFFIXES = (".jsonl", ".json", ".parquet")


class DataError(ValueError):
    """A data set that cannot be read as asked; the message says what was looked for."""


class SplitError(DataError):
    """A folder with no file, or a saved data set with no split, of the split asked for."""


def load_rows(path: str, split: str = "train", subset: str | None = None) -> list[dict]:
    """Every row of the data set at `path`, as plain dicts."""
    source = _source(path, subset)
    if _saved(source):
        return _read_saved(source, split)
    return _read_file(_file(source, split))


def first_row(path: str, split: str = "train", subset: str | None = None) -> dict | None:
    """Row 0 of the data set at `path`, read without the rest where the format allows; None for a folder saved by
    `datasets`, which only `datasets` reads (and it imports torch)."""
    source = _source(path, subset)
    if _saved(source):
        return None
    file = _file(source, split)
    if file.suffix not in SUFFIXES:
        raise _unsupported(file)
    try:
        rows = _first(file)
    except (ValueError, TypeError) as exc:  # JSON's and pyarrow's errors, a byte that is not UTF-8, ragged columns
        raise DataError(f"{file}: not readable as {file.suffix[1:]}: {exc}") from exc
    if not rows:
        raise DataError(f"{file}: no rows")
    if not isinstance(rows[0], dict):
        raise DataError(f"{file}: rows are {type(rows[0]).__name__}, not objects with named columns")
    return rows[0]


def _first(file: Path) -> list:
    """The file's first row, in a list (empty: no rows)."""
    if file.suffix == ".jsonl":
        with file.open(encoding="utf-8") as fh:
            return next(([json.loads(line)] for line in fh if line.strip()), [])
    if file.suffix == ".parquet":
        import pyarrow.parquet as pq

        return next((batch.to_pylist()[:1] for batch in pq.ParquetFile(file).iter_batches(batch_size=1)), [])
    return _read_file(file)[:1]


def _source(path: str, subset: str | None) -> Path:
    """The file or folder `path` names, its `subset` folder where it has one."""
    source = Path(path)
    if subset and source.is_dir() and (source / subset).exists():
        source = source / subset
    if not source.exists():
        raise DataError(f"{path}: no such file or folder")
    return source


def _file(source: Path, split: str) -> Path:
    """The file to read: `source` itself, or its file of `split`."""
    return source if source.is_file() else _split_file(source, split)


def _saved(source: Path) -> bool:
    return source.is_dir() and ((source / "dataset_dict.json").exists() or (source / "dataset_info.json").exists())


def _split_file(folder: Path, split: str) -> Path:
    candidates = [
        p
        for p in sorted(folder.iterdir())
        if p.suffix in SUFFIXES and (p.stem == split or p.stem.startswith(f"{split}-"))
    ]
    if not candidates:
        found = ", ".join(p.name for p in sorted(folder.iterdir()) if p.suffix in SUFFIXES) or "none"
        raise SplitError(
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
    raise _unsupported(path)


def _unsupported(path: Path) -> DataError:
    return DataError(f"{path}: unsupported file type {path.suffix!r}; use {', '.join(SUFFIXES)} or a datasets folder")


def _columns_to_rows(data: dict) -> list[dict]:
    columns = list(data)
    return [dict(zip(columns, values)) for values in zip(*data.values())]


def _read_saved(folder: Path, split: str) -> list[dict]:
    import datasets

    saved = datasets.load_from_disk(str(folder))
    if isinstance(saved, datasets.DatasetDict):
        if split not in saved:
            raise SplitError(f"{folder}: no split {split!r}; splits: {', '.join(saved)}")
        saved = saved[split]
    return saved.to_list()
