"""Imports by name: objects by an import path, `module:attr`, as configs name a user's own workflow or reward
function; and modules that load on first use."""

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any


def import_path(path: str, what: str) -> Any:
    """The object at `path` (`module:attr`); a ValueError naming `what` when it does not import."""
    module_name, _, attr = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what}: cannot import {path!r}: {exc}") from exc


def lazy_module(name: str) -> ModuleType:
    """Module `name`, run on its first attribute access (as it is where it was imported already)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:  # as an import binds it: `package.module` resolves by attribute too (mock.patch does so)
        setattr(sys.modules[parent], child, module)
    return module
