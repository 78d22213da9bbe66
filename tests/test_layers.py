"""Layers, bottom up: errors and paths, platforms, utils, config, launch, runtime, cli; nothing imports upward."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "trinity"
# demo (the embedded demo's assets) sits with the runtime: only the cli imports it.
RANK = {
    "errors": 0,
    "paths": 0,
    "platforms": 1,
    "utils": 2,
    "config": 3,
    "launch": 4,
    "runtime": 5,
    "demo": 5,
    "cli": 6,
    "__main__": 7,
}


def _layer(parts: tuple[str, ...]) -> str:
    return parts[0].removesuffix(".py") if parts else ""


def _imported_layers(path: Path) -> set[tuple[str, int]]:
    """(top-level trinity module, line) of every import in the file, relative or absolute, at any depth."""
    here = path.relative_to(PACKAGE).parts[:-1]  # the package this module is in
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - node.level + 1]
            target = (*base, *(node.module or "").split(".")) if node.module else (*base, *(a.name for a in node.names))
            found.add((target[0] if target else "", node.lineno))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trinity."):
            found.add((node.module.split(".")[1], node.lineno))
        elif isinstance(node, ast.Import):
            found |= {(a.name.split(".")[1], node.lineno) for a in node.names if a.name.startswith("trinity.")}
    return {(name.removesuffix(".py"), line) for name, line in found if name}


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if _layer(p.relative_to(PACKAGE).parts) in RANK)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_layer_above_its_own(path):
    own = _layer(path.relative_to(PACKAGE).parts)
    upward = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports trinity.{name}"
        for name, line in _imported_layers(path)
        if RANK.get(name, 0) > RANK[own]
    ]
    assert upward == []


def test_every_top_level_module_has_a_rank():
    tops = {
        p.name.removesuffix(".py")
        for p in PACKAGE.iterdir()
        if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert tops <= set(RANK), f"give {sorted(tops - set(RANK))} a place in RANK"
