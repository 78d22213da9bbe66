"""Read a YAML file the way OmegaConf does, keeping the line and column of every key."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf._utils import get_yaml_loader

from ...errors import ConfigError, Issue
from .yaml_limits import MAX_DEPTH, depth_issue, needs_scan, scan_issue

Path_ = tuple  # a key path such as ('buffer', 'eval_tasksets', 0, 'name')
Mark = tuple  # (file, line, column), shown relative to the working directory of the moment
_OMEGACONF = get_yaml_loader()


class _Loader(yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):  # type: ignore[misc]
    """OmegaConf's resolvers and constructors (1e-6 is a float, no timestamps) on libyaml's fast parser."""

    yaml_implicit_resolvers = _OMEGACONF.yaml_implicit_resolvers
    yaml_constructors = _OMEGACONF.yaml_constructors

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG and key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key_node.value}",
                    key_node.start_mark,
                )
            seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


@dataclass(frozen=True)
class YamlDoc:
    """A parsed YAML mapping and the file position of each key path in it."""

    path: Path
    data: dict[str, Any]
    positions: dict[Path_, Mark] = field(default_factory=dict)

    def where(self, key_path: Path_) -> str:
        """`file:line:col` of the key, or of its nearest enclosing key."""
        return locate(self.positions, key_path, self.path)


def locate(positions: dict[Path_, Mark], key_path: Path_, default: Path) -> str:
    """`file:line:col` of the key or its nearest enclosing key, else the file."""
    for end in range(len(key_path), -1, -1):
        if key_path[:end] in positions:
            file, line, col = positions[key_path[:end]]
            return f"{display_path(file)}:{line}:{col}"
    return display_path(default)


def display_path(path: Path) -> str:
    """The path relative to the working directory when it is below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def load_yaml(path: Path, what: str = "config file") -> YamlDoc:
    """Parse `path` into data and positions; syntax problems become one ConfigError."""
    shown = display_path(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Issue(f"{what} not found", source=shown, hint="check the path")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Issue(f"cannot read {what}: {exc}", source=shown)]) from None
    node, data = _parse(text, shown)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            [Issue(f"{what} must be a mapping of keys, not a {type(data).__name__}", source=f"{shown}:1:1")]
        )
    positions: dict[Path_, Mark] = {}
    if node is not None:
        # after construction, which folds `<<: *base` merges into their mappings
        _index(node, (), Path(path), positions)
    return YamlDoc(Path(path), data, positions)


def _parse(text: str, shown: str) -> tuple[yaml.Node | None, Any]:
    """The node graph and the data of one YAML document; every YAML problem is one ConfigError."""
    try:
        if needs_scan(text):  # an extra pass over the events, before anything expands or recurses
            _refuse_hostile(text, shown)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            return node, (loader.construct_document(node) if node is not None else {})
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        raise ConfigError([_syntax_issue(shown, exc)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([Issue(f"YAML error: {exc}", source=shown)]) from None


def _refuse_hostile(text: str, shown: str) -> None:
    loader = _Loader(text)
    try:
        issue = scan_issue(loader, shown)
    finally:
        loader.dispose()
    if issue:
        raise ConfigError([issue])


def _syntax_issue(shown: str, exc: yaml.MarkedYAMLError) -> Issue:
    mark = exc.problem_mark or exc.context_mark
    where = f"{shown}:{mark.line + 1}:{mark.column + 1}" if mark else shown
    problem = " ".join(filter(None, [exc.context, exc.problem]))
    # libyaml >= 0.2.6 (PyYAML 6.0.4 wheels) stops at 1,000 levels before our scan sees an event
    if "maximum nesting depth" in problem:
        return depth_issue(where)
    hint = "keep one of them" if "duplicate key" in problem else "check indentation, colons, brackets and quotes"
    return Issue(f"YAML syntax error: {problem}", source=where, hint=hint)


def _index(node: yaml.Node, prefix: tuple, file: Path, out: dict) -> None:
    # every later walk recurses: stop before Python's stack does
    if len(prefix) >= MAX_DEPTH and isinstance(node, yaml.CollectionNode):
        raise ConfigError(
            [depth_issue(f"{display_path(file)}:{node.start_mark.line + 1}:{node.start_mark.column + 1}")]
        )
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            path = prefix + (key_node.value,)
            out[path] = (file, key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            _index(value_node, path, file, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = prefix + (i,)
            out[path] = (file, item.start_mark.line + 1, item.start_mark.column + 1)
            _index(item, path, file, out)
