"""Resolve `${...}` interpolations (oc.env, references to other keys) and find `???` values, reporting each failure."""

import copy
import os
import re
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from ..errors import ConfigError, Issue, dotted
from .merge import MISSING, leaves


def resolve_interpolations(tree: dict[str, Any], where: Callable[[tuple], str]) -> tuple[dict[str, Any], list[Issue]]:
    """A plain tree with every interpolation resolved, leaving out the leaves that failed, and their issues."""
    pending = [path for path, value in leaves(tree) if isinstance(value, str) and ("${" in value or value == MISSING)]
    if not pending:
        return tree, []  # OmegaConf is only needed where there is something to resolve
    select = _pending_only(tree, pending) or _whole_tree(tree, where)
    issues: list[Issue] = []
    out = copy.deepcopy(tree)
    for path in pending:
        try:
            _assign(out, path, _plain(select(path)))
        except MissingMandatoryValue:
            issues.append(
                Issue(
                    "is '???' (a value you must supply) and no layer sets it",
                    key=dotted(path),
                    source=where(path),
                    hint=f"set it in your run config or as {dotted(path)}=VALUE",
                )
            )
            _remove(out, path)
        except OmegaConfBaseException as exc:
            issues.append(_issue(exc, path, where))
            _remove(out, path)
    return out, issues


# `${oc.env:VAR}` or `${oc.env:VAR,default}` with a plain default: it reads no other key of the tree
_ENV_ONLY = re.compile(r"\$\{oc\.env:[^${}\\'\"]*\}")


def _pending_only(tree: dict[str, Any], pending: list[tuple]) -> Callable[[tuple], Any] | None:
    """Where no pending value refers to another key (env variables and '???' only: the usual case), OmegaConf needs
    only those values, not the whole tree (most of a render's resolution time otherwise), and a value that is one
    `${oc.env:VAR,plain default}` not even OmegaConf's grammar; None where it needs the tree, or where the tree holds
    something OmegaConf would refuse (its report then says so as before)."""
    values = {path: _select(tree, path) for path in pending}
    if not _plain_tree(tree) or any(v != MISSING and "${" in _ENV_ONLY.sub("", v) for v in values.values()):
        return None
    known = {path: found for path, value in values.items() if (found := env_value(value)) is not _UNKNOWN}
    rest = [path for path in values if path not in known]
    root = OmegaConf.create({str(i): values[path] for i, path in enumerate(rest)}) if rest else None
    index = {path: str(i) for i, path in enumerate(rest)}
    return lambda path: known[path] if path in known else root[index[path]]


_UNKNOWN = object()
# the whole value one `${oc.env:VAR}` or `${oc.env:VAR,default}` whose default OmegaConf reads as the text itself
_ENV_PLAIN = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)(?:,([A-Za-z0-9_./-]+))?\}")
_KEYWORDS = {"true", "false", "null"}


def env_value(value: str) -> Any:
    """What OmegaConf resolves `value` to, where that is sure without its grammar: the variable's text, or a plain
    default (no number, bool or null that the grammar would convert); else _UNKNOWN (OmegaConf resolves it, and
    reports a variable that is not set)."""
    match = _ENV_PLAIN.fullmatch(value)
    if match is None:
        return _UNKNOWN
    name, default = match.groups()
    if name in os.environ:
        return os.environ[name]
    if default is None or default.lower() in _KEYWORDS or _number(default):
        return _UNKNOWN
    return default


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return not text[0].isalpha() and text[0] not in "./_"  # a digit or sign first: let the grammar decide
    return True


def _plain_tree(node: Any) -> bool:
    if isinstance(node, dict):
        return all(isinstance(k, str) and _plain_tree(v) for k, v in node.items())
    if isinstance(node, list):
        return all(_plain_tree(v) for v in node)
    return node is None or isinstance(node, (str, int, float, bool))


def _whole_tree(tree: dict[str, Any], where: Callable[[tuple], str]) -> Callable[[tuple], Any]:
    try:
        root = OmegaConf.create(tree)
    except OmegaConfBaseException as exc:
        raise ConfigError([_issue(exc, (), where)]) from None
    return lambda path: _select(root, path)


def _select(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value


def _assign(tree: Any, path: tuple, value: Any) -> None:
    for part in path[:-1]:
        tree = tree[part]
    tree[path[-1]] = value


def _remove(tree: Any, path: tuple) -> None:
    for part in path[:-1]:
        tree = tree[part]
    if isinstance(tree, dict):
        del tree[path[-1]]
    else:
        tree[path[-1]] = None


def _issue(exc: OmegaConfBaseException, path: tuple, where: Callable[[tuple], str]) -> Issue:
    text = str(exc).splitlines()[0]
    if "Environment variable" in text and "not found" in text:
        var = text.split("'")[1] if "'" in text else "VAR"
        hint = f"export {var}=... before running, or give a default: ${{oc.env:{var},DEFAULT}}"
        return Issue(
            f"environment variable {var} is not set and has no default", key=dotted(path), source=where(path), hint=hint
        )
    return Issue(
        f"cannot resolve interpolation: {text}",
        key=dotted(path),
        source=where(path),
        hint="interpolations look like ${oc.env:VAR,default} or ${section.key}",
    )
