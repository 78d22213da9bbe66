"""Which files of a data set folder (or hub repo) hold one subset's split, as `datasets.load_dataset(path, subset,
split=...)` finds them (Trinity-RFT reads every data set that way).

- A card (`README.md`) whose front matter lists `configs:` names each subset (`config_name`) and its files per split
  (`data_files`: a pattern, a list of them, or `{split, path}` entries; relative to `data_dir`); with no subset
  asked, the one marked `default: true`, named `default`, or the only one.
- Otherwise there is one subset and the file names say the splits, in datasets' order of rules: `data/<split>-NNNNN-of-
  NNNNN.*` shards; a folder named for the split (train/training, validation/valid/dev/val, test/testing/eval/
  evaluation); a file named for it; else every data file is `train`. trinity also takes a subset's own folder
  (`<path>/<subset>/`), as it always has, and ignores a subset it cannot find in a repo without a card.
Pure: the files come as a list of repo-relative paths, from a folder here or from the hub's listing of a repo.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".csv")  # the text formats trinity reads (datasets' packaged builders)
IGNORED = frozenset({"README.md", "config.json", "dataset_info.json", "dataset_infos.json", "dataset_dict.json"})
SPLIT_KEYWORDS = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
SEP = "[-._ 0-9]"
SHARD = re.compile(r"^data/(?P<split>\w+)-\d{5}-of-\d{5}[^/]*\.[^/]+$")


class DataError(ValueError):
    """A data set that cannot be read as asked; the message says what was looked for."""


class SplitError(DataError):
    """A data set with no files, or no split, of the split asked for."""


class SubsetError(DataError):
    """A data set whose card names no subset of the name asked for, or several with none asked for."""


@dataclass(frozen=True)
class Layout:
    """A data set's subsets, each a mapping of split -> its files (repo-relative paths, sorted)."""

    subsets: dict[str, dict[str, tuple[str, ...]]]
    default: str | None  # the subset read when none is named; None: several and none marked default
    from_card: bool


def card_data(readme: str) -> dict:
    """The YAML front matter of a card (`---` ... `---` at its top); {} where there is none or it is no mapping."""
    lines = readme.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        return {}
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def layout(files: Iterable[str], card: dict) -> Layout:
    """The subsets and splits of a repo holding `files`, with `card` its card's front matter."""
    data = sorted(f for f in files if _is_data(f))
    configs = card.get("configs")
    if isinstance(configs, list) and configs:
        subsets = {
            str(c["config_name"]): _card_splits(c, data) for c in configs if isinstance(c, dict) and "config_name" in c
        }
        marked = [c["config_name"] for c in configs if isinstance(c, dict) and c.get("default")]
        default = marked[0] if marked else ("default" if "default" in subsets else None)
        return Layout(subsets, default or (next(iter(subsets)) if len(subsets) == 1 else None), True)
    return Layout({"default": inferred_splits(data)}, "default", False)


def split_files(found: Layout, subset: str | None, split: str, where: str) -> tuple[str, ...]:
    """The files of `split` in `subset` (the default one when None); SubsetError or SplitError naming what exists."""
    name = subset if subset in found.subsets else None if found.from_card and subset else found.default
    if name is None:
        listed = ", ".join(found.subsets)
        if subset:
            raise SubsetError(f"{where}: no subset {subset!r}; its card names {listed}")
        raise SubsetError(f"{where}: several subsets ({listed}) and none is the default; name one in subset_name")
    splits = found.subsets[name]
    if split not in splits or not splits[split]:
        shown = ", ".join(s for s, f in splits.items() if f) or "none"
        if found.from_card:
            raise SplitError(f"{where}: no split {split!r} of subset {name!r}; its card's splits: {shown}")
        files = sorted({f for names in splits.values() for f in names})
        listed = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "") or "none"
        raise SplitError(
            f"{where}: no file for split {split!r} ({split}.jsonl, {split}-00000.parquet, a {split}/ folder, ...): "
            f"splits: {shown}; data files here: {listed}"
        )
    return splits[split]


def folder_files(folder: Path) -> list[str]:
    """Every file under `folder`, as repo-relative paths (hidden files and folders left out, as datasets does)."""
    found = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and not any(part.startswith((".", "__")) for part in relative.split("/")):
            found.append(relative)
    return sorted(found)


def folder_layout(folder: Path) -> Layout:
    """The layout of a data set folder here: its card and files."""
    readme = folder / "README.md"
    card = card_data(readme.read_text(encoding="utf-8", errors="replace")) if readme.is_file() else {}
    return layout(folder_files(folder), card)


def _is_data(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name not in IGNORED and path.endswith(DATA_SUFFIXES) and not name.startswith((".", "__"))


def _card_splits(config: dict, data: list[str]) -> dict[str, tuple[str, ...]]:
    """split -> files of one `configs:` entry (no `data_files`: the inferred splits under its `data_dir`)."""
    base = str(config.get("data_dir") or "").strip("/")
    under = [f for f in data if not base or f.startswith(base + "/")]
    declared = config.get("data_files")
    if declared is None:
        relative = inferred_splits([f[len(base) + 1 :] if base else f for f in under])
        return {s: tuple(f"{base}/{f}" if base else f for f in files) for s, files in relative.items()}
    entries = [{"split": "train", "path": declared}] if isinstance(declared, str) else declared
    splits: dict[str, list[str]] = {}
    for entry in entries:
        split, patterns = ("train", entry) if isinstance(entry, str) else (entry.get("split"), entry.get("path"))
        for pattern in [patterns] if isinstance(patterns, str) else patterns or []:
            full = f"{base}/{pattern}" if base else pattern
            splits.setdefault(str(split), []).extend(f for f in under if _glob(full).match(f))
    return {s: tuple(sorted(set(files))) for s, files in splits.items()}


def inferred_splits(data: list[str]) -> dict[str, tuple[str, ...]]:
    """split -> files from the file names alone, by datasets' rules in its order (module docstring)."""
    shards: dict[str, list[str]] = {}
    for path in data:
        if match := SHARD.match(path):
            shards.setdefault(match["split"], []).append(path)
    if shards:
        return {s: tuple(files) for s, files in shards.items()}
    for where in ("dir", "file"):
        found = {s: tuple(f for f in data if _named_for(f, words, where)) for s, words in SPLIT_KEYWORDS.items()}
        if any(found.values()):
            return {s: files for s, files in found.items() if files}
    return {"train": tuple(data)} if data else {}


def _named_for(path: str, words: tuple[str, ...], where: str) -> bool:
    """Whether a folder in `path` (`dir`) or its file name (`file`) is named for one of `words`: the word, alone or
    followed by a separator, at the start or after one (`train`, `train-00000`, `gsm8k_test.jsonl`)."""
    parts = path.split("/")
    names = parts[:-1] if where == "dir" else parts[-1:]
    return any(re.fullmatch(rf"(?:.*{SEP})?(?:{'|'.join(words)})(?:{SEP}.*)?", n) for n in names)


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern:
    """fsspec's glob as datasets uses it: `**` any folders (none too), `*` and `?` within a name, `[...]` a class."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 1)) > i:
            out, i = out + pattern[i : close + 1], close + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")
