"""Pydantic validation that reports every error with its source, key, what is allowed and a hint."""

import re
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError, Issue, did_you_mean, dotted
from .redact import MASK, is_secret_name

M = TypeVar("M", bound=BaseModel)
Locate = Callable[[tuple], str]
# (key path, dotted key, source) -> the error for a key the schema lacks but knows of, or None
# (path, dotted key, where; the value a literal refused) -> the issue Trinity-RFT's knowledge gives, or None
Known = Callable[..., Issue | None]


def validate(model: type[M], data: Any, locate: Locate, prefix: tuple = (), known: Known | None = None) -> M:
    """`model` built from `data`, or a ConfigError listing every problem."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(issues_from(exc, model, locate, prefix, known)) from None


def issues_from(
    exc: ValidationError, model: type[BaseModel], locate: Locate, prefix: tuple = (), known: Known | None = None
) -> list[Issue]:
    """One Issue per pydantic error."""
    return [_issue(err, model, locate, prefix, known) for err in exc.errors(include_url=False)]


def _issue(err: dict, model: type[BaseModel], locate: Locate, prefix: tuple, known: Known | None) -> Issue:
    loc = tuple(part for part in err["loc"] if not _is_tag(part))
    key, where = dotted(prefix + loc), locate(prefix + loc)
    kind, ctx = err["type"], err.get("ctx", {})
    if kind == "extra_forbidden" and known is not None:
        issue = known(prefix + loc, key, where)
        if issue is not None:
            return issue
    if kind == "extra_forbidden":
        fields = fields_at(model, loc[:-1])
        return Issue(
            "unknown key",
            key=key,
            source=where,
            allowed=", ".join(fields),
            hint=did_you_mean(str(loc[-1]), fields) or "remove it, or check the section it is in",
        )
    if kind == "missing":
        return Issue(
            "required, and no layer sets it",
            key=key,
            source=where,
            hint=f"set {key} in your run config or as {key}=VALUE",
        )
    got = err.get("input")
    # a value upstream takes (a name, or a switch such as use_v1: false): known() says why trinity does not
    if kind == "literal_error" and known is not None and isinstance(got, (str, bool)):
        issue = known(prefix + loc, key, where, got)
        if issue is not None:
            return issue
    shown = MASK if loc and is_secret_name(str(loc[-1])) else got  # a wrong credential is still a credential
    message = f"{err['msg'][0].lower()}{err['msg'][1:]}" + (
        "" if isinstance(got, (dict, list)) else f" (got {shown!r})"
    )
    allowed = _allowed(kind, ctx)
    hint = (
        did_you_mean(str(shown), re.findall(r"'([^']*)'", allowed))
        if kind == "literal_error"
        else _hint(kind, got, shown)
    )
    return Issue(message, key=key, source=where, allowed=allowed, hint=hint)


def _allowed(kind: str, ctx: dict) -> str:
    if "expected" in ctx:
        return str(ctx["expected"])
    bounds = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "min_length": "length >=", "max_length": "length <="}
    return ", ".join(f"{sign} {ctx[name]}" for name, sign in bounds.items() if name in ctx)


def _hint(kind: str, got: Any, shown: Any) -> str:
    if kind == "string_pattern_mismatch":
        return "environment variable names are letters, digits and _, and do not start with a digit"
    if kind == "string_type" and isinstance(got, (int, float, bool)):
        return f"quote it: '{shown}'"
    if kind.startswith(("int_", "float_")) and isinstance(got, str) and _is_number(got):
        return "write the number without quotes"
    return ""


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _is_tag(part: Any) -> bool:
    # pydantic adds type tags such as 'function-after[...]' or 'literal[...]' to union locations
    return isinstance(part, str) and ("[" in part or part in ("str", "int", "float", "bool"))


def fields_at(model: Any, loc: tuple) -> list[str]:
    """Field names of the model found by walking `loc` from `model` ([] where that is not a model)."""
    current = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, str) and _is_model(current) and part in current.model_fields:
            current = current.model_fields[part].annotation
    current = _unwrap(current)
    return list(current.model_fields) if _is_model(current) else []


def _unwrap(tp: Any) -> Any:
    # Optional[X], list[X], dict[str, X] -> X
    while True:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType) and len(args) == 1:
            tp = args[0]
        elif origin in (list, tuple) and args:
            tp = args[0]
        elif origin is dict and len(args) == 2:
            tp = args[1]
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)
