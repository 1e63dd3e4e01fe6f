"""One call of an operation: the request made from the LLM's arguments (parameters serialized
as OpenAPI's styles say, the body as JSON, a form or raw text), the credentials added, and the
response as the tool's outcome: a 2xx is a result, any other status a failure the LLM reads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from .._http import send
from ..tools import ToolOutcome
from ._auth import Credentials, Parts
from ._operations import Body, Operation, Param

__all__ = ["Caller"]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _pairs(value: Mapping[str, Any]) -> list[str]:
    return [x for k, v in value.items() for x in (str(k), _text(v))]


def _path_value(param: Param, value: Any) -> str:
    """A path parameter in the `simple`, `label` or `matrix` style (percent-encoded)."""
    if isinstance(value, list):
        items = [quote(_text(v), safe="") for v in value]
    elif isinstance(value, Mapping):
        if param.explode:
            items = [
                f"{quote(str(k), safe='')}={quote(_text(v), safe='')}" for k, v in value.items()
            ]
        else:
            items = [quote(x, safe="") for x in _pairs(value)]
    else:
        items = [quote(_text(value), safe="")]
    if param.style == "label":
        return "." + ("." if param.explode else ",").join(items)
    if param.style == "matrix":
        name = quote(param.name, safe="")
        if param.explode and isinstance(value, list):
            return "".join(f";{name}={item}" for item in items)
        return f";{name}=" + ",".join(items)
    return ",".join(items)


def _query(param: Param, value: Any) -> list[tuple[str, str]]:
    """A query parameter in its style (`form`, `spaceDelimited`, `pipeDelimited`,
    `deepObject`), or as JSON text when the document says its content is JSON."""
    name = param.name
    if param.as_json:
        return [(name, json.dumps(value, ensure_ascii=False, separators=(",", ":")))]
    if isinstance(value, list):
        joiner = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(param.style, ",")
        if param.explode and param.style == "form":
            return [(name, _text(v)) for v in value]
        return [(name, joiner.join(_text(v) for v in value))]
    if isinstance(value, Mapping):
        if param.style == "deepObject":
            return [(f"{name}[{k}]", _text(v)) for k, v in value.items()]
        if param.explode:
            return [(str(k), _text(v)) for k, v in value.items()]
        return [(name, ",".join(_pairs(value)))]
    return [(name, _text(value))]


def _simple(param: Param, value: Any) -> str:
    if param.as_json:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    if isinstance(value, Mapping):
        if param.explode:
            return ",".join(f"{k}={_text(v)}" for k, v in value.items())
        return ",".join(_pairs(value))
    return _text(value)


def _form(name: str, value: Any) -> list[tuple[str, str]]:
    """A form field: lists as repeated fields, objects as `name[key]` (deepObject)."""
    if isinstance(value, Mapping):
        return [pair for k, v in value.items() for pair in _form(f"{name}[{k}]", v)]
    if isinstance(value, list):
        return [pair for v in value for pair in _form(name, v)]
    return [(name, _text(value))]


def _body(body: Body, args: Mapping[str, Any]) -> tuple[bytes | None, str | None]:
    if body.arg is not None:
        if body.arg not in args:
            return None, None
        value = args[body.arg]
    else:
        value = {prop: args[arg] for arg, prop in body.fields if arg in args}
        if not value and not body.required:
            return None, None
    media = body.media_type if "*" not in body.media_type else "application/octet-stream"
    if body.encoding == "json":
        return json.dumps(value, ensure_ascii=False).encode(), media
    if body.encoding == "form":
        items = value.items() if isinstance(value, Mapping) else [("body", value)]
        pairs = [pair for k, v in items for pair in _form(str(k), v)]
        return urlencode(pairs).encode(), media
    return _text(value).encode(), media


@dataclass(frozen=True)
class Caller:
    """Calls the operations of one API: where it is (the URL given, else the operation's own
    server, else the document's), its credentials and limits."""

    base_url: str | None
    default_url: str | None
    credentials: Credentials
    timeout: float
    max_bytes: int
    headers: tuple[tuple[str, str], ...] = ()

    def request(self, op: Operation, args: Mapping[str, Any]) -> tuple[str, Parts, bytes | None]:
        """The URL, query, headers and body of a call, credentials added."""
        parts = Parts(headers=dict(self.headers))
        path = op.path
        for param in op.params:
            if param.arg not in args or args[param.arg] is None:
                continue
            value = args[param.arg]
            if param.location == "path":
                path = path.replace("{" + param.name + "}", _path_value(param, value))
            elif param.location == "query":
                parts.params.extend(_query(param, value))
            elif param.location == "header":
                parts.headers[param.name] = _simple(param, value)
            else:
                parts.cookies.append(f"{param.name}={quote(_simple(param, value), safe='')}")
        content = None
        if op.body is not None:
            content, media = _body(op.body, args)
            if media is not None:
                parts.headers["Content-Type"] = media
        if op.accept is not None:
            parts.headers.setdefault("Accept", op.accept)
        self.credentials.apply(op, parts)
        if parts.cookies:
            parts.headers["Cookie"] = "; ".join(parts.cookies)
        base = self.base_url or op.server or self.default_url or ""
        return base.rstrip("/") + path, parts, content

    async def call(self, op: Operation, args: Mapping[str, Any]) -> ToolOutcome:
        """Make the call; the response as the outcome (never raises for an HTTP status)."""
        url, parts, content = self.request(op, args)
        try:
            async with asyncio.timeout(self.timeout):
                reply = await send(
                    op.method,
                    url,
                    params=parts.params,
                    headers=parts.headers,
                    content=content,
                    timeout=self.timeout,
                    max_bytes=self.max_bytes,
                )
        except (TimeoutError, httpx.TimeoutException) as e:
            message = f"{op.label} had no answer within {self.timeout}s"
            if op.idempotent or isinstance(e, httpx.ConnectTimeout):
                return ToolOutcome.failed("TimeoutError", message)
            return ToolOutcome.unknown("TimeoutError", f"{message}; it may have taken effect")
        except httpx.HTTPError as e:
            return ToolOutcome.failed(type(e).__name__, f"{op.label}: {e or 'no detail'}")
        text = f"{reply.status_line}\n{reply.shown()}".rstrip("\n")
        if reply.ok:
            return ToolOutcome.ok(text)
        return ToolOutcome.failed("HTTPError", text)
