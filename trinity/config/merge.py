"""Deep merge of plain config trees, OmegaConf-style: mappings merge, anything else replaces."""

from typing import Any

MISSING = "???"


def deep_merge(base: dict, top: dict) -> dict:
    """A new tree: `top` merged into `base`; a later '???' does not replace a set value."""
    out = dict(base)
    for key, value in top.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = deep_merge(old, value)
        elif value == MISSING and key in out and old != MISSING:
            continue
        else:
            out[key] = value
    return out


def leaves(tree: Any, prefix: tuple = ()):
    """(path, value) for every leaf, every list and every empty mapping of a tree."""
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            yield from leaves(value, prefix + (key,))
    else:
        yield prefix, tree
        if isinstance(tree, list):
            for i, item in enumerate(tree):
                yield from leaves(item, prefix + (i,))


def flat(tree: Any) -> dict[tuple, Any]:
    """Path -> value for every scalar and empty container; lists go item by item."""
    return {p: v for p, v in leaves(tree) if p and not (isinstance(v, (list, dict)) and v)}


def get_path(tree: Any, path: tuple, default: Any = None) -> Any:
    """The value at `path`, or `default` when any step is absent."""
    for part in path:
        try:
            tree = tree[part]
        except (KeyError, IndexError, TypeError):
            return default
    return tree
