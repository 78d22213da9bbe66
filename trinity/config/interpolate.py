"""Resolve `${...}` interpolations (oc.env, references to other keys) leaf by leaf, reporting each failure."""

from typing import Any, Callable

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from .errors import ConfigError, Issue, dotted


def resolve_interpolations(tree: dict[str, Any], where: Callable[[tuple], str]) -> dict[str, Any]:
    """A plain tree with every interpolation resolved; all failures in one ConfigError."""
    issues: list[Issue] = []
    plain = _walk(OmegaConf.create(tree), (), where, issues)
    if issues:
        raise ConfigError(issues)
    return plain


def _walk(node: Any, path: tuple, where: Callable[[tuple], str], issues: list[Issue]) -> Any:
    keys = range(len(node)) if isinstance(node, ListConfig) else list(node.keys())
    out: Any = [] if isinstance(node, ListConfig) else {}
    for key in keys:
        sub = path + (key,)
        try:
            value = node[key]
        except MissingMandatoryValue:
            issues.append(Issue("is '???' (a value you must supply) and no layer sets it", key=dotted(sub), source=where(sub), hint=f"set it in your run config or as {dotted(sub)}=VALUE"))
            continue
        except OmegaConfBaseException as exc:
            issues.append(_interpolation_issue(exc, sub, where))
            continue
        value = _walk(value, sub, where, issues) if isinstance(value, (DictConfig, ListConfig)) else value
        if isinstance(out, list):
            out.append(value)
        else:
            out[key] = value
    return out


def _interpolation_issue(exc: OmegaConfBaseException, path: tuple, where: Callable[[tuple], str]) -> Issue:
    text = str(exc).splitlines()[0]
    if "Environment variable" in text and "not found" in text:
        var = text.split("'")[1] if "'" in text else "VAR"
        hint = f"export {var}=... before running, or give a default: ${{oc.env:{var},DEFAULT}}"
        return Issue(f"environment variable {var} is not set and has no default", key=dotted(path), source=where(path), hint=hint)
    return Issue(f"cannot resolve interpolation: {text}", key=dotted(path), source=where(path), hint="interpolations look like ${oc.env:VAR,default} or ${section.key}")
