"""A derivation that records, per rule, the keys each rule actually reads and writes: what the rules' declarations
(`@rule(reads=..., writes=...)`) are held to."""

import copy
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from trinity.config import derive as derive_package
from trinity.config import resolve as resolve_module
from trinity.config.derive._context import Context
from trinity.errors import undotted

Path = tuple[str, ...]


def _path(key: str) -> Path:
    return tuple("*" if isinstance(part, int) else str(part) for part in undotted(key))


class _SeenDict(dict):
    """A copy of a mapping a rule got, recording the keys it reads inside; its presence and key set (truthiness,
    iteration, membership) as `path.#`, which only a write of the mapping itself changes."""

    def __init__(self, raw: dict, path: Path, seen: set) -> None:
        super().__init__(raw)
        self._path, self._seen = path, seen

    def __getitem__(self, key):
        return _wrap(super().__getitem__(key), (*self._path, str(key)), self._seen)

    def get(self, key, default=None):
        return self[key] if super().__contains__(key) else _leaf(default, (*self._path, str(key)), self._seen)

    def _whole(self) -> None:
        self._seen.add((*self._path, "#"))

    def __iter__(self):
        self._whole()
        return super().__iter__()

    def __len__(self):
        self._whole()
        return super().__len__()

    def __contains__(self, key):
        self._whole()
        return super().__contains__(key)

    def keys(self):
        self._whole()
        return super().keys()

    def items(self):
        self._whole()
        return [(k, self[k]) for k in super().keys()]

    def values(self):
        self._whole()
        return [self[k] for k in super().keys()]


class _SeenList(list):
    """A copy of a list a rule got: each element records as `path.*`, its length as `path.#`."""

    def __init__(self, raw: list, path: Path, seen: set) -> None:
        super().__init__(raw)
        self._path, self._seen = path, seen

    def __getitem__(self, index):
        return _wrap(super().__getitem__(index), (*self._path, "*"), self._seen)

    def __iter__(self):
        self._seen.add((*self._path, "#"))
        return (_wrap(v, (*self._path, "*"), self._seen) for v in super().__iter__())

    def __len__(self):
        self._seen.add((*self._path, "#"))
        return super().__len__()


def _leaf(value: Any, path: Path, seen: set) -> Any:
    # None read is the key's absence, which only a write of the key (or above it) changes: `path.#`
    seen.add(path if value is not None else (*path, "#"))
    return value


def _wrap(value: Any, path: Path, seen: set) -> Any:
    if isinstance(value, dict):
        return _SeenDict(value, path, seen)
    if isinstance(value, list):
        return _SeenList(value, path, seen)
    return _leaf(value, path, seen)


@dataclass
class RecordingContext(Context):
    """A Context whose reads are recorded in `seen` (set by the pass to the current rule's set)."""

    seen: set = field(default_factory=set)

    def get(self, key: str) -> Any:
        return _wrap(super().get(key), _path(key), self.seen)

    def input(self, key: str) -> str:
        self.seen.add(_path(key))  # the rule names the whole value among its inputs
        return super().input(key)


def _changed(before: Any, after: Any, path: Path = ()) -> set[Path]:
    """The paths whose values differ (a list index as `*`)."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = set(before) | set(after)
        return set().union(
            *(
                _changed(before[k], after[k], (*path, str(k))) if k in before and k in after else {(*path, str(k))}
                for k in keys
            )
        )
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return set().union(*(_changed(b, a, (*path, "*")) for b, a in zip(before, after)))
    return set() if before == after else {path}


@dataclass
class Record:
    """Per rule (by function), the dotted keys it read and wrote over every derivation recorded."""

    reads: dict = field(default_factory=dict)
    writes: dict = field(default_factory=dict)


@contextmanager
def recording():
    """Within it, every derivation (resolve's) records into the Record it yields."""
    record, real = Record(), resolve_module.derive

    def derive(data, loaded, provenance, selection="", run_stages=(), stage_index=None, driver=None):
        ctx = RecordingContext(data, loaded, provenance, selection, run_stages, stage_index, driver)
        for rule in derive_package.RULES:
            before, ctx.seen = copy.deepcopy(ctx.data), record.reads.setdefault(rule, set())
            rule(ctx)
            record.writes.setdefault(rule, set()).update(_changed(before, ctx.data))
        return ctx.data, ctx.issues

    resolve_module.derive = derive
    try:
        yield record
    finally:
        resolve_module.derive = real


def dotted_keys(paths: set[Path]) -> set[str]:
    return {".".join(p) for p in paths}
