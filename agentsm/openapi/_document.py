"""An OpenAPI document read from a file, a URL or a string (JSON or YAML), and its `$ref`s."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin

import httpx

from ..errors import BuildError

__all__ = ["Document", "Unresolvable"]


class Unresolvable(Exception):
    """A `$ref` that does not point into the document (another file, or nothing)."""


def _plain(value: Any) -> Any:
    """YAML's values as JSON's: keys as strings (`200:`), dates as ISO text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return value


def _parse(text: str, origin: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml
    except ImportError:
        raise BuildError(
            f"The OpenAPI document {origin} is not JSON, and reading YAML needs PyYAML: "
            "pip install 'agentsm[openapi]'."
        ) from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return _plain(yaml.load(text, Loader=loader))  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        raise BuildError(f"The OpenAPI document {origin} is neither JSON nor YAML: {e}") from e


def _read(spec: str | Path, timeout: float) -> tuple[str, str, str | None]:
    """The text of the document, a label for messages and the URL it came from."""
    if isinstance(spec, str) and spec.startswith(("http://", "https://")):
        try:
            response = httpx.get(spec, timeout=timeout, follow_redirects=True)
            response.raise_for_status()
        except httpx.HTTPError as e:
            raise BuildError(
                f"The OpenAPI document at {spec} could not be fetched ({type(e).__name__}: "
                f"{e}); check the URL, or give the document as a file."
            ) from e
        return response.text, spec, str(response.url)
    if isinstance(spec, str) and (spec.lstrip().startswith("{") or "\n" in spec):
        return spec, "given as a string", None
    path = Path(spec)
    try:
        return path.read_text(encoding="utf-8"), str(path), None
    except OSError as e:
        raise BuildError(
            f"The OpenAPI document {str(spec)!r} could not be read ({e.strerror or e}); give a "
            "file path, an http(s) URL, or the document's JSON or YAML text."
        ) from e


class Document:
    """A parsed OpenAPI 3.0 or 3.1 document; `url` is where it was fetched from, if it was."""

    def __init__(self, data: Mapping[str, Any], label: str, url: str | None = None) -> None:
        if not isinstance(data, Mapping):
            raise BuildError(f"The OpenAPI document {label} is not an object.")
        version = str(data.get("openapi", ""))
        if not version.startswith("3."):
            found = f"Swagger {data['swagger']}" if "swagger" in data else repr(version or None)
            raise BuildError(
                f"The document {label} is not OpenAPI 3.x (its version is {found}); convert a "
                "Swagger 2.0 document to OpenAPI 3 first (e.g. with swagger2openapi)."
            )
        if not isinstance(data.get("paths") or {}, Mapping):
            raise BuildError(f"The OpenAPI document {label} has paths that are not an object.")
        self.data: dict[str, Any] = dict(data)
        self.label = label
        self.url = url
        self.version = version

    @classmethod
    def load(cls, spec: str | Path | Mapping[str, Any], *, timeout: float = 30.0) -> Document:
        """Read a document from a path, an http(s) URL, JSON or YAML text, or a dict."""
        if isinstance(spec, Mapping):
            return cls(_plain(dict(spec)), "given as a dict")
        if not isinstance(spec, str | Path):
            raise BuildError(
                f"openapi() takes a path, a URL, the document's text or a dict, not {spec!r}."
            )
        text, label, url = _read(spec, timeout)
        return cls(_parse(text, label), label, url)

    @property
    def title(self) -> str:
        """The API's title (`info.title`)."""
        info = self.data.get("info")
        return str(info.get("title") or "API") if isinstance(info, Mapping) else "API"

    def resolve(self, ref: Any) -> Any:
        """The value a local `$ref` (`#/components/schemas/Pet`) points to."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise Unresolvable(f"{ref!r} is not a reference inside the document")
        node: Any = self.data
        for raw in unquote(ref[1:]).split("/")[1:] if ref != "#" else ():
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise Unresolvable(f"{ref!r} points to nothing in the document")
        return node

    def deref(self, node: Any) -> Any:
        """A parameter, request body or response object with its `$ref`s followed."""
        seen: set[str] = set()
        while isinstance(node, Mapping) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise Unresolvable(f"{ref!r} refers to itself")
            seen.add(ref)
            node = self.resolve(ref)
        return node

    def server(self, servers: Any = None) -> str | None:
        """The URL of the first server (of `servers`, else the document's), its variables at
        their defaults and a relative URL resolved against where the document came from."""
        listed = servers if isinstance(servers, list) and servers else self.data.get("servers")
        if not isinstance(listed, list) or not listed or not isinstance(listed[0], Mapping):
            return None
        url = str(listed[0].get("url") or "")
        for name, variable in (listed[0].get("variables") or {}).items():
            if isinstance(variable, Mapping) and "default" in variable:
                url = url.replace("{" + str(name) + "}", str(variable["default"]))
        if "://" not in url:
            if self.url is None:
                return None
            url = urljoin(self.url, url)
        return url
