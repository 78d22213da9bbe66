"""Imports by name: objects by an import path, `module:attr`, as configs name a user's own workflow or reward
function; and modules that load on first use."""

import importlib
import importlib.util
import pkgutil
import sys
from types import ModuleType
from typing import Any


def import_path(path: str, what: str) -> Any:
    """The object at `path`, imported now: `module:attr`, or a module alone (`module`). The one loader of objects by
    name (a config's workflow or reward, an engine entry's class and preflight check, an algorithm entry's module and
    actor loss). A ValueError says `what` asked for `path` and, where it can, what exists there instead."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"{what}: cannot import {path!r}: {exc}{_modules_beside(module_name)}") from exc
    if not attr:
        return module
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise ValueError(f"{what}: cannot import {path!r}: {exc}{_names_in(module)}") from exc


def _modules_beside(name: str) -> str:
    """The modules of the package `name` would be in, where that package imports: what could have been meant."""
    parent = name.rpartition(".")[0]
    try:
        package = importlib.import_module(parent) if parent else None
        found = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))
    except Exception:  # a hint only: no such package either, a module where a package was named, or a broken one
        found = []
    return f" ({parent} has: {', '.join(found)})" if found else ""


def _names_in(module: ModuleType) -> str:
    """The public names `module` defines, the attributes one could have meant."""
    names = sorted(
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
    )
    return f" ({module.__name__} defines: {', '.join(names)})" if names else ""


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
