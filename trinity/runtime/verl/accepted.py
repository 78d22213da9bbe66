"""Trainer configs verl accepted, remembered by what it was asked: a run asking the same again (a rerun, a resume, a
sweep's next run that changes no value verl is given) skips verl's check, a child importing verl (5-15 s on 2 cores,
4-7 s of a run's start-up there: docs/runtime.md).

The key holds what the answer depends on: each question's settings (verl key -> value, and the trinity key it came
from) and the passthrough merged over them; the files and folders they name, by their entries' sizes and modification
times (verl reads a model's config and tokenizer); the Python, the folders the child imports from (installing or
removing a package changes them), verl's platform variables and this check's own code. Only acceptances are kept: a
refusal is asked of verl every time, and an acceptance gone stale is refused where the trainer builds the same config.
"""

import hashlib
import json
import os
import site
import sys
from pathlib import Path
from typing import Any

from ...config.schema import RunConfig
from ...paths import cache_dir
from . import config as verl_config
from . import refusals

FOLDER = "verl-accepted"  # under trinity's cache folder: one empty file per accepted key
CODE = (verl_config.__file__, refusals.__file__)  # what asks verl and reads its answer


def key(stages: list[RunConfig], verl_env: dict[str, str]) -> str | None:
    """The name of verl's answer to `stages` under `verl_env` (equal names, equal answers); None where it cannot be
    named (a path that cannot be read, a value JSON cannot order): verl is asked, as without this memory."""
    parts: list[Any] = [sys.executable, sys.version, sorted(verl_env.items()), _import_folders(), _code()]
    try:
        for config in stages:
            passthrough = config.trainer.trainer_config
            parts.append([passthrough, [_stamp(leaf) for leaf in _leaves(passthrough)]])
            for builder, args in refusals.questions(config):
                settings = verl_config.SETTINGS[builder](*args)
                parts.append([builder.__name__, settings, [_stamp(value) for value, _ in settings.values()]])
        text = json.dumps(parts, sort_keys=True, default=repr)
    except (OSError, TypeError, ValueError, KeyError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def known(name: str | None) -> bool:
    """Whether verl accepted `name` before (a cache folder that cannot be read: no)."""
    return name is not None and os.path.isfile(os.path.join(cache_dir(), FOLDER, name))


def remember(name: str | None) -> None:
    """Keep verl's acceptance of `name`; a cache folder that cannot be written keeps nothing (the check runs again)."""
    if name is None:
        return
    folder = cache_dir() / FOLDER
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).touch()
    except OSError:
        return


def _import_folders() -> list[tuple[str, int]]:
    """The folders the check's child imports from, beside trinity's own, and when each last changed."""
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    folders = [*extra, *site.getsitepackages(), site.getusersitepackages()]
    return [(folder, _entry(folder)) for folder in folders]


def _code() -> str:
    return hashlib.sha256(b"".join(Path(file).read_bytes() for file in CODE)).hexdigest()


def _leaves(tree: Any) -> list[Any]:
    """The scalar values of a nested passthrough (verl reads the files some of them name)."""
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    if isinstance(tree, list):
        return [leaf for value in tree for leaf in _leaves(value)]
    return [tree]


def _stamp(value: Any) -> Any:
    """A path named, as its entries' names, sizes and modification times; anything else: nothing. An entry that
    cannot be read (a dangling link) is stamped as such."""
    if not isinstance(value, str) or not value or not os.path.exists(value):
        return None
    if not os.path.isdir(value):
        return _entry(value)
    with os.scandir(value) as entries:
        return sorted((entry.name, *_entry(entry.path)) for entry in entries)


def _entry(path: str) -> tuple[int, int]:
    """(size, modification time) of a file or folder; (-1, -1) where it cannot be read."""
    try:
        stat = os.stat(path)
    except OSError:
        return -1, -1
    return stat.st_size, stat.st_mtime_ns
