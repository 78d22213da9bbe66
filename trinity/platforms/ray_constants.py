"""Ray's own accelerator constants, read from Ray's source without importing Ray (which takes seconds).

Used by `trinity profile lint` to check a profile's resource key and visible-devices variables
against the Ray that is installed, instead of against our retyped strings.
"""

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RayAccelerator:
    resource: str
    visible_devices_env: str | None
    noset_visible_devices_env: str | None
    source: str


def ray_accelerators() -> dict[str, list[RayAccelerator]] | None:
    """Resource name -> constants of each accelerator manager of the installed Ray (AMD, Intel and
    NVIDIA all use `GPU`); None without Ray."""
    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "_private" / "accelerators"
    found: dict[str, list[RayAccelerator]] = {}
    for path in sorted(folder.glob("*.py")):
        accelerator = _read(path)
        if accelerator:
            found.setdefault(accelerator.resource, []).append(accelerator)
    return found


def _read(path: Path) -> RayAccelerator | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    returns = _method_returns(tree)
    resource = returns.get("get_resource_name")
    if not isinstance(resource, ast.Constant) or not isinstance(resource.value, str):
        return None
    visible = returns.get("get_visible_accelerator_ids_env_var")
    visible_name = constants.get(visible.id) if isinstance(visible, ast.Name) else getattr(visible, "value", None)
    noset = next(
        (v for k, v in constants.items() if k.startswith("NOSET_") and k.endswith("_VISIBLE_DEVICES_ENV_VAR")), None
    )
    return RayAccelerator(resource.value, visible_name, noset, str(path))


def _method_returns(tree: ast.Module) -> dict[str, ast.expr]:
    """Method name -> the expression of its first `return`, for every class in the module."""
    out = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            ret = next((n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None), None)
            if ret is not None:
                out[fn.name] = ret.value
    return out
