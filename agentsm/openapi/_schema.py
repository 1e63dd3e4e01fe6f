"""OpenAPI schemas as self-contained JSON Schema (draft 2020-12) for an LLM's tool arguments.

`$ref`s are inlined; a reference met again inside itself (a tree of comments, say) is cut
there and described, so every schema is finite. OpenAPI 3.0's dialect is translated
(`nullable`, boolean `exclusiveMinimum`); what only documents (`xml`, `discriminator`,
examples, `x-...` extensions) is left out, and so are the keywords a faulty document
gives an impossible value, so that what the LLM is sent is always a valid schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._document import Document

__all__ = ["SchemaMaker"]

_SUBSCHEMA = {"not", "if", "then", "else", "contains", "propertyNames", "unevaluatedProperties"}
_SUBSCHEMA |= {"unevaluatedItems", "additionalItems", "contentSchema"}
_SCHEMA_MAPS = {"properties", "patternProperties", "dependentSchemas"}
_SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}
_NUMBERS = {"minimum", "maximum", "multipleOf"}
_COUNTS = {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
_TEXTS = {"description", "title", "format", "pattern", "contentMediaType", "contentEncoding"}
_FLAGS = {"uniqueItems", "readOnly", "writeOnly", "deprecated"}
_VALUES = {"default", "const"}
_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}
_DROPPED = {"xml", "externalDocs", "discriminator", "nullable", "example", "examples"}
_DROPPED |= {"$schema", "$id"}
_DROPPED |= {"$defs", "definitions", "$anchor", "$dynamicAnchor", "$comment", "$vocabulary"}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")


class SchemaMaker:
    """Makes the JSON Schemas of one document's operations.

    `depth` bounds how many `$ref`s deep a schema is inlined: beyond it a reference becomes
    a described object of any shape, which keeps the schemas of a large API a size an LLM can
    be sent (the server still checks what it gets)."""

    def __init__(self, document: Document, *, depth: int = 8) -> None:
        self._document = document
        self._depth = depth

    def schema(self, node: Any, *, request: bool = True) -> dict[str, Any]:
        """`node` as JSON Schema; `request`: properties the server sets (`readOnly`) are left
        out, as OpenAPI says a request must not send them. Raises `Unresolvable`."""
        return self._convert(node, (), request)

    def _convert(self, node: Any, refs: tuple[str, ...], request: bool) -> dict[str, Any]:
        if node is True or not isinstance(node, Mapping):
            return {}
        if node is False:
            return {"not": {}}
        if "$ref" in node:
            return self._ref(node, refs, request)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED or key.startswith("x-"):
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {str(k): self._convert(v, refs, request) for k, v in value.items()}
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self._convert(v, refs, request) for v in value]
            elif key in _SUBSCHEMA or key in ("items", "additionalProperties"):
                if isinstance(value, bool) and key != "items":
                    out[key] = value
                elif isinstance(value, Mapping | bool):
                    out[key] = self._convert(value, refs, request)
            else:
                self._keyword(out, key, value)
        self._openapi30(node, out)
        if request:
            self._without_read_only(out)
        return out

    def _ref(self, node: Mapping[str, Any], refs: tuple[str, ...], request: bool) -> dict[str, Any]:
        ref = str(node["$ref"])
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if ref in refs or len(refs) >= self._depth:
            target = self._document.resolve(ref)
            kind = target.get("type") if isinstance(target, Mapping) else None
            why = "contains itself" if ref in refs else "is nested too deep to show here"
            out: dict[str, Any] = {"type": kind} if kind in _TYPES else {}
            out["description"] = f"A {_name(ref)} (its schema {why}; any such value)."
        else:
            out = dict(self._convert(self._document.resolve(ref), (*refs, ref), request))
        beside = {k: v for k, v in siblings.items() if k != "nullable"}
        if beside:  # OpenAPI 3.1: keywords beside a $ref apply too (a description, mostly)
            out.update(self._convert(beside, refs, request))
        self._openapi30(siblings, out)
        return out

    @staticmethod
    def _keyword(out: dict[str, Any], key: str, value: Any) -> None:
        """Copy a plain keyword when its value is one JSON Schema allows."""
        if key == "type":
            kinds = [value] if isinstance(value, str) else value
            if isinstance(kinds, list) and kinds and all(k in _TYPES for k in kinds):
                out[key] = value if isinstance(value, str) else list(dict.fromkeys(kinds))
        elif key == "required":
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                out[key] = list(dict.fromkeys(value))
        elif key == "enum":
            if isinstance(value, list) and value:
                out[key] = value
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            if _number(value):
                out[key] = value
        elif key in _NUMBERS:
            if _number(value) and (key != "multipleOf" or value > 0):
                out[key] = value
        elif key in _COUNTS:
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out[key] = value
        elif key in _TEXTS:
            if isinstance(value, str):
                out[key] = value
        elif key in _FLAGS:
            if isinstance(value, bool):
                out[key] = value
        elif key in _VALUES:
            out[key] = value
        elif key == "dependentRequired" and isinstance(value, Mapping):
            out[key] = {
                str(k): v
                for k, v in value.items()
                if isinstance(v, list) and all(isinstance(x, str) for x in v)
            }

    @staticmethod
    def _openapi30(node: Mapping[str, Any], out: dict[str, Any]) -> None:
        """OpenAPI 3.0's dialect in 2020-12 terms."""
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if node.get(key) is True and _number(out.get(bound)):
                out[key] = out.pop(bound)
        if node.get("nullable") is True:
            kind = out.get("type")
            if isinstance(kind, str):
                out["type"] = [kind, "null"]
            elif isinstance(kind, list):
                out["type"] = [*kind, "null"] if "null" not in kind else kind
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
            if kind is None:
                inner = dict(out)
                description = inner.pop("description", None)
                out.clear()
                out["anyOf"] = [inner, {"type": "null"}]
                if description is not None:
                    out["description"] = description

    @staticmethod
    def _without_read_only(out: dict[str, Any]) -> None:
        props = out.get("properties")
        if not isinstance(props, dict):
            return
        hidden = [k for k, v in props.items() if isinstance(v, dict) and v.get("readOnly")]
        for key in hidden:
            del props[key]
        if hidden and isinstance(out.get("required"), list):
            out["required"] = [k for k in out["required"] if k not in hidden]
