"""Objects named by an import path, `module:attr`, as configs name a user's own workflow or reward function."""

import importlib
from typing import Any


def import_path(path: str, what: str) -> Any:
    """The object at `path` (`module:attr`); a ValueError naming `what` when it does not import."""
    module_name, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what}: cannot import {path!r}: {exc}") from exc
