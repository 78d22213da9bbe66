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


MAX_LINES = 450  # a module longer than this does more than one thing: split it where its parts meet


def _name(path: Path) -> str:
    """The dotted name of a trinity module (a package by its __init__)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str) -> set[str]:
    """The trinity modules module `name` imports, anywhere in it: at its top, under TYPE_CHECKING, inside a function (a
    lazy import only delays a circle, it does not remove it). `from package import module` imports that module."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return (found & set(MODULES)) - {name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of two or more modules that import one another, round and round (Tarjan's strongly connected
    components), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


def test_the_circle_finder_finds_a_circle_and_only_circles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_no_modules_import_one_another_in_a_circle():
    circles = _circles({name: _imports(name) for name in MODULES})
    assert circles == [], "move what they share to a module of its own: " + "; ".join(" <-> ".join(c) for c in circles)


def test_no_module_is_longer_than_max_lines():
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"split these modules (lines over {MAX_LINES}): {long}"
