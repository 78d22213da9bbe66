"""JSON Schema (draft-07) of run configs and hardware profiles for editors, generated from the pydantic models."""

import json
from collections.abc import Callable
from typing import Any

from .schema import HardwareProfile, RunConfig

DRAFT = "http://json-schema.org/draft-07/schema#"
LAYERED = "Keys and types only: required values may come from another layer, so trinity, not the editor, checks them."


def run_config_schema() -> dict[str, Any]:
    """Schema of a run-config file (the `hardware` block comes from profiles and is left out)."""
    schema = _draft07(RunConfig, "trinity run config")
    schema["properties"].pop("hardware")
    return schema


def profile_schema() -> dict[str, Any]:
    """Schema of a hardware-profile file."""
    return _draft07(HardwareProfile, "trinity hardware profile")


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {"run-config": run_config_schema, "hardware-profile": profile_schema}


def dumps(schema: dict[str, Any]) -> str:
    """The schema as committed: indented JSON with a final newline."""
    return json.dumps(schema, indent=2) + "\n"


def _draft07(model: Any, title: str) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/definitions/{model}")
    schema["definitions"] = schema.pop("$defs", {})
    schema = _convert(schema)
    return {
        "$schema": DRAFT,
        "title": title,
        "description": LAYERED,
        **{k: v for k, v in schema.items() if k != "title"},
    }


# A value written as an interpolation (`${oc.env:NODE_NUM,2}`) is a string in the file and is typed by the field it
# lands in once resolved: every value that is not a string may be written so.
INTERPOLATION = {"type": "string", "pattern": "^\\$\\{.+\\}$"}
NOT_STRINGS = ("integer", "number", "boolean")


def _convert(node: Any) -> Any:
    """pydantic writes draft 2020-12: tuples use prefixItems; draft-07 spells that items: [...]; and drop `required`.
    A number, boolean or choice may also be an interpolation."""
    if isinstance(node, list):
        return [_convert(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _convert(v) for k, v in node.items() if k != "required"}
    if "prefixItems" in out:
        out["items"] = out.pop("prefixItems")
        out["additionalItems"] = False
    if out.get("type") in NOT_STRINGS or "enum" in out or "const" in out:
        kept = {k: out.pop(k) for k in ("description", "default", "title") if k in out}
        return {"anyOf": [out, INTERPOLATION], **kept}
    return out
