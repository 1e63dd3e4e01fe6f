"""The operations of an OpenAPI document, each with the one JSON schema an LLM fills in.

An operation's path, query, header and cookie parameters and the properties of its JSON (or
form) request body become the top-level arguments of one object. A name two of them share is
told apart by where it goes (`id` and `body_id`); a body that is not an object with known
properties (an array, a union, free-form) is one argument, `body`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._document import Document, Unresolvable
from ._schema import SchemaMaker

__all__ = ["Body", "Operation", "Param", "Skipped", "read_operations", "tool_names"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
LOCATIONS = ("path", "query", "header", "cookie")
DESCRIPTION_LIMIT = 1024
MAX_DEPTH = 8
"""How many `$ref`s deep a schema is inlined at most."""
_IGNORED_HEADERS = {"accept", "content-type", "authorization"}  # OpenAPI: these SHALL be ignored


@dataclass(frozen=True)
class Param:
    """A parameter: the argument that holds it, its name and place in the request."""

    arg: str
    name: str
    location: str
    style: str
    explode: bool
    as_json: bool = False


@dataclass(frozen=True)
class Body:
    """The request body: its media type and how it is sent (`json`, `form` or `raw`); either
    `fields` (argument, property) of a flattened object, or the one argument `arg`."""

    media_type: str
    encoding: str
    required: bool
    fields: tuple[tuple[str, str], ...] = ()
    arg: str | None = None


class Skipped(NamedTuple):
    """An operation that cannot be offered, and why."""

    label: str
    operation_id: str | None
    reason: str


@dataclass(frozen=True)
class Operation:
    """One operation of the document, ready to be called."""

    operation_id: str
    method: str
    path: str
    description: str
    tags: tuple[str, ...]
    params: tuple[Param, ...]
    body: Body | None
    schema: dict[str, Any]
    security: tuple[tuple[str, ...], ...] | None
    """Alternatives, each the names of the schemes it needs; None: the document says none."""
    accept: str | None
    server: str | None

    @property
    def idempotent(self) -> bool:
        """GET, HEAD and OPTIONS change nothing: such a call may be made again."""
        return self.method in ("GET", "HEAD", "OPTIONS")

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"


def _is_json(media: str) -> bool:
    kind = media.split(";")[0].strip().lower()
    return kind.endswith("/json") or kind.endswith("+json")


def _key(name: str) -> str:
    """An argument name providers accept (`^[a-zA-Z0-9_.-]{1,64}$`)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64] or "_"


def _arg(name: str, where: str, taken: set[str]) -> str:
    base = _key(name)
    candidates = [base, _key(f"{where}_{name}")]
    found = next((c for c in candidates if c not in taken), None)
    n = 2
    while found is None:
        suffix = f"_{n}"
        candidate = base[: 64 - len(suffix)] + suffix
        found = candidate if candidate not in taken else None
        n += 1
    taken.add(found)
    return found


def _object_parts(schema: Any) -> tuple[dict[str, Any], list[str]] | None:
    """The properties and required names of an object schema (through `allOf`), or None for
    a schema that is not a closed object with named properties."""
    if not isinstance(schema, dict) or any(
        k in schema for k in ("anyOf", "oneOf", "not", "if", "patternProperties")
    ):
        return None
    if schema.get("additionalProperties") not in (None, False):
        return None
    kind = schema.get("type", "object")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" not in kinds or not set(kinds) <= {"object", "null"}:
        return None
    props: dict[str, Any] = dict(schema.get("properties") or {})
    required = list(schema.get("required") or [])
    for part in schema.get("allOf") or []:
        inner = _object_parts(part)
        if inner is None:
            return None
        props.update(inner[0])
        required.extend(inner[1])
    return props, required


def _describe(op: Mapping[str, Any], method: str, path: str) -> str:
    summary = str(op.get("summary") or "").strip()
    detail = str(op.get("description") or "").strip()
    text = summary if not detail or detail == summary else f"{summary}\n\n{detail}".strip()
    text = text or f"{method} {path}"
    if op.get("deprecated") is True:
        text = f"(Deprecated) {text}"
    if len(text) > DESCRIPTION_LIMIT:
        text = text[: DESCRIPTION_LIMIT - 1].rstrip() + "…"
    return text


def _security(value: Any) -> tuple[tuple[str, ...], ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(tuple(str(k) for k in r) for r in value if isinstance(r, Mapping))


def _accept(doc: Document, responses: Any) -> str | None:
    """The media type to ask for: JSON if a success response offers it, else the first."""
    offered: list[str] = []
    for code, response in (responses or {}).items() if isinstance(responses, Mapping) else ():
        try:
            found = doc.deref(response) if str(code).startswith("2") else None
        except Unresolvable:  # a response it cannot read says nothing of what to ask for
            continue
        content = found.get("content") if isinstance(found, Mapping) else None
        if isinstance(content, Mapping):
            offered.extend(str(m) for m in content if "*" not in str(m))
    return next((m for m in offered if _is_json(m)), offered[0] if offered else None)


class _Reader:
    def __init__(self, doc: Document, maker: SchemaMaker) -> None:
        self.doc = doc
        self.maker = maker

    def operation(self, path: str, method: str, item: Mapping[str, Any]) -> Operation | str:
        """The operation, or why it cannot be offered."""
        op = item[method]
        taken: set[str] = set()
        props: dict[str, Any] = {}
        required: list[str] = []
        merged: dict[tuple[str, str], Any] = {}
        for raw in [*(item.get("parameters") or []), *(op.get("parameters") or [])]:
            param = self.doc.deref(raw)
            if isinstance(param, Mapping) and param.get("in") in LOCATIONS and "name" in param:
                merged[(str(param["in"]), str(param["name"]))] = param  # the operation's win
        params: list[Param] = []
        for location in LOCATIONS:
            for (where, name), param in merged.items():
                if where != location or (where == "header" and name.lower() in _IGNORED_HEADERS):
                    continue
                param_schema, as_json = self._param_schema(param)
                arg = _arg(name, where, taken)
                style = param.get("style") or ("form" if where in ("query", "cookie") else "simple")
                explode = param.get("explode", style == "form")
                params.append(Param(arg, name, where, str(style), bool(explode), as_json))
                props[arg] = param_schema
                if where == "path" or param.get("required") is True:
                    required.append(arg)
        body = self._body(op.get("requestBody"), taken, props, required)
        if isinstance(body, str):
            return body
        schema: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return Operation(
            operation_id=str(op["operationId"]),
            method=method.upper(),
            path=path,
            description=_describe(op, method.upper(), path),
            tags=tuple(str(t) for t in op.get("tags") or ()),
            params=tuple(params),
            body=body,
            schema=schema,
            security=_security(
                op["security"] if "security" in op else self.doc.data.get("security")
            ),
            accept=_accept(self.doc, op.get("responses")),
            server=self.doc.server(op.get("servers") or item.get("servers"))
            if op.get("servers") or item.get("servers")
            else None,
        )

    def _param_schema(self, param: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        as_json = False
        source = param.get("schema")
        if source is None and isinstance(param.get("content"), Mapping) and param["content"]:
            media, entry = next(iter(param["content"].items()))
            as_json = _is_json(str(media))
            source = entry.get("schema") if isinstance(entry, Mapping) else None
        schema = self.maker.schema(source if source is not None else {"type": "string"})
        if isinstance(param.get("description"), str) and param["description"].strip():
            schema = {**schema, "description": param["description"].strip()}
        return schema, as_json

    def _body(
        self, raw: Any, taken: set[str], props: dict[str, Any], required: list[str]
    ) -> Body | str | None:
        body = self.doc.deref(raw)
        if not isinstance(body, Mapping) or not isinstance(body.get("content"), Mapping):
            return None
        content: Mapping[str, Any] = body["content"]
        media = next((m for m in content if _is_json(m)), None)
        encoding = "json"
        if media is None:
            encoding = "form"
            media = next(
                (
                    m
                    for m in content
                    if m.split(";")[0].strip() == "application/x-www-form-urlencoded"
                ),
                None,
            )
        if media is None:
            encoding = "raw"
            media = next((m for m in content if not m.startswith("multipart/")), None)
        if media is None:
            return f"its request body is {', '.join(content)} (file uploads are not supported)"
        needed = body.get("required") is True
        entry = content[media] if isinstance(content[media], Mapping) else {}
        if encoding == "raw":
            schema: dict[str, Any] = {"type": "string"}
        else:
            schema = self.maker.schema(entry.get("schema", {}))
        parts = _object_parts(schema) if encoding != "raw" else None
        if parts is not None and parts[0]:
            fields = []
            for name, prop in parts[0].items():
                arg = _arg(name, "body", taken)
                fields.append((arg, name))
                props[arg] = prop
                if needed and name in parts[1]:
                    required.append(arg)
            return Body(media, encoding, needed, fields=tuple(fields))
        arg = _arg("body", "request", taken)
        text = str(body.get("description") or "").strip()
        props[arg] = {**schema, "description": text} if text else schema
        if encoding == "raw" and "description" not in props[arg]:
            props[arg]["description"] = f"The request body ({media})."
        if needed:
            required.append(arg)
        return Body(media, encoding, needed, arg=arg)


def _fitted(
    readers: list[_Reader], path: str, method: str, item: Mapping[str, Any], limit: int
) -> Operation | str:
    """The operation with its schemas inlined as deep as fits in `limit` characters of JSON
    (the shallowest if none does)."""
    made: Operation | str = ""
    for reader in readers:
        made = reader.operation(path, method, item)
        if isinstance(made, str) or len(json.dumps(made.schema)) <= limit:
            break
    return made


def read_operations(
    doc: Document, *, max_schema_chars: int = 20_000
) -> tuple[list[Operation], list[Skipped]]:
    """Every operation the document offers, in its order, and those it cannot offer with the
    reason (no operationId, a body that is a file upload, a `$ref` to another file). A schema
    is inlined as many `$ref`s deep as keeps it within `max_schema_chars` characters of JSON."""
    readers = [_Reader(doc, SchemaMaker(doc, depth=d)) for d in range(MAX_DEPTH, -1, -1)]
    found: list[Operation] = []
    skipped: list[Skipped] = []
    for path, raw in (doc.data.get("paths") or {}).items():
        try:
            item = doc.deref(raw)
        except Unresolvable as e:
            skipped.append(Skipped(str(path), None, str(e)))
            continue
        if not isinstance(item, Mapping):
            continue
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, Mapping):
                continue
            label = f"{method.upper()} {path}"
            if not isinstance(op.get("operationId"), str) or not op["operationId"].strip():
                skipped.append(Skipped(label, None, "it has no operationId"))
                continue
            try:
                made = _fitted(readers, str(path), method, item, max_schema_chars)
            except Unresolvable as e:
                made = f"it uses {e}"
            if isinstance(made, str):
                skipped.append(Skipped(label, str(op["operationId"]), made))
            else:
                found.append(made)
    return found, skipped


def tool_names(operation_ids: list[str], prefix: str = "") -> list[str]:
    """A tool name for each operation id that every provider accepts (a letter first, then
    letters, digits, `_` and `-`, at most 64), unique among them."""
    names: list[str] = []
    taken: set[str] = set()
    for op_id in operation_ids:
        name = re.sub(r"[^A-Za-z0-9_-]+", "_", op_id).strip("_")
        name = prefix + name
        if not name[:1].isalpha():
            name = f"op_{name}"
        if len(name) > 64:
            name = f"{name[:55]}_{hashlib.sha256(op_id.encode()).hexdigest()[:8]}"
        base, n = name, 2
        while name in taken:
            suffix = f"_{n}"
            name = base[: 64 - len(suffix)] + suffix
            n += 1
        taken.add(name)
        names.append(name)
    return names
