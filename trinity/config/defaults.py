"""The schema-default tree: every key the run config has, with its default."""

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from .schema import RunConfig


@cache
def schema_defaults() -> dict[str, Any]:
    """Defaults of RunConfig as a plain tree (required leaves are absent; derived leaves are null)."""
    return _defaults(RunConfig)


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if field.default is PydanticUndefined and field.default_factory is None:
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                out[name] = _defaults(field.annotation)
            continue
        value = field.get_default(call_default_factory=True)
        out[name] = _defaults(type(value)) if isinstance(value, BaseModel) else _plain(value)
    return out


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
