"""A small JSON Schema checker for tool arguments: the subset LLM tool schemas use."""

from __future__ import annotations

from typing import Any

__all__ = ["schema_errors"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list, tuple),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is(value: Any, type_name: str) -> bool:
    kinds = _TYPES.get(type_name)
    if kinds is None:
        return True
    if isinstance(value, bool) and type_name in ("integer", "number"):
        return False
    if type_name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, kinds)


def schema_errors(value: Any, schema: dict[str, Any], path: str = "args") -> list[str]:
    """Every way `value` breaks `schema` (type, enum, required, properties, items, bounds)."""
    errors: list[str] = []
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is(value, n) for n in names):
            return [f"{path} should be {' or '.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path} should be one of {schema['enum']}, got {value!r}")
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}.{key} is required")
        for key, item in value.items():
            if key in props:
                errors.extend(schema_errors(item, props[key], f"{path}.{key}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}.{key} is not an accepted argument")
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            errors.extend(schema_errors(item, schema["items"], f"{path}[{i}]"))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path} should be >= {schema['minimum']}, got {value}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path} should be <= {schema['maximum']}, got {value}")
    return errors
