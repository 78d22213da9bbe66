"""Rows of a local data set: a JSONL, JSON, Parquet or CSV file, a folder of them (a hub repo's snapshot, with its
card), or a folder saved by `datasets` (save_to_disk).

Nothing is downloaded here: the driver fetched every data set named by hub id before Ray started, and a run reads
what is on disk, on every node, the same way. `subset_name` and `split` pick the files as `datasets.load_dataset`
does (`trinity.config.data_files`); every shard of a split is read.
"""

import json
from pathlib import Path

from ...config.data_files import DATA_SUFFIXES as SUFFIXES
from ...config.data_files import DataError, SplitError, folder_layout, split_files

__all__ = ["SUFFIXES", "DataError", "SplitError", "first_row", "load_rows"]


def load_rows(path: str, split: str = "train", subset: str | None = None) -> list[dict]:
    """Every row of the data set at `path`, as plain dicts."""
    source = _source(path, subset)
    if _saved(source):
        return _read_saved(source, split)
    return [row for file in _files(source, split, subset) for row in _read_file(file)]


def first_row(path: str, split: str = "train", subset: str | None = None) -> dict | None:
    """Row 0 of the data set at `path`, read without the rest where the format allows; None for a folder saved by
    `datasets`, which only `datasets` reads (and it imports torch)."""
    source = _source(path, subset)
    if _saved(source):
        return None
    files = _files(source, split, subset)
    for file in files:
        try:
            rows = _first(file)
        except (ValueError, TypeError) as exc:  # JSON's and pyarrow's errors, a byte that is not UTF-8, ragged columns
            raise DataError(f"{file}: not readable as {file.suffix[1:]}: {exc}") from exc
        if rows:
            if not isinstance(rows[0], dict):
                raise DataError(f"{file}: rows are {type(rows[0]).__name__}, not objects with named columns")
            return rows[0]
    raise DataError(f"{files[0] if len(files) == 1 else source}: no rows")


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
    """The file or folder `path` names: a subset's own folder where it has one and no card names its subsets."""
    source = Path(path)
    if not source.exists():
        raise DataError(f"{path}: no such file or folder")
    if subset and source.is_dir() and (source / subset).is_dir() and not folder_layout(source).from_card:
        return source / subset
    return source


def _files(source: Path, split: str, subset: str | None) -> list[Path]:
    """The files holding `split`: `source` itself, or the ones its folder's card or file names give the split."""
    if source.is_file():
        if source.suffix not in SUFFIXES:
            raise _unsupported(source)
        return [source]
    found = folder_layout(source)
    return [source / name for name in split_files(found, subset if found.from_card else None, split, str(source))]


def _saved(source: Path) -> bool:
    return source.is_dir() and ((source / "dataset_dict.json").exists() or (source / "dataset_info.json").exists())


def _read_file(path: Path) -> list[dict]:
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    if path.suffix == ".json":
        return _read_json(path.read_text(encoding="utf-8"))
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.suffix == ".csv":
        import pyarrow.csv as pc

        return pc.read_csv(path).to_pylist()
    raise _unsupported(path)


def _read_json(text: str) -> list[dict]:
    """A JSON file as datasets' json builder reads one: an array of rows, a mapping of columns, or JSON lines."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return data if isinstance(data, list) else _columns_to_rows(data)


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
