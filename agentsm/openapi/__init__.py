"""OpenAPI tools: each operation of an OpenAPI 3.0 or 3.1 document (a file, a URL, or its JSON
or YAML text) offered to the LLM as a tool, called with httpx.

    agent = AgentBuilder("Is pet 10 for sale?").openapi(
        "petstore.yaml", base_url="https://petstore3.swagger.io/api/v3",
        auth={"api_key": os.environ["PETSTORE_KEY"]}, tags=["pet"],
    )

Each result is recorded like any tool's (status line and body, cut at a size limit), so replay,
branch and resume serve it and never call the API again. Credentials are added when a request
is sent: they are never among the arguments the LLM gives, and the builder hands them to the
run's redaction hooks, so a server that echoes one cannot bring it into the log.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import BuildError
from ..tools import Tool, ToolOutcome
from ._auth import ApiKey, Auth, Basic, Bearer, Credentials
from ._call import Caller
from ._document import Document
from ._operations import Operation, Skipped, read_operations, tool_names

__all__ = ["ApiKey", "Auth", "Basic", "Bearer", "OpenApi", "OpenApiTool", "Operation", "Skipped"]


class OpenApiTool(Tool):
    """A tool that calls one operation; GET, HEAD and OPTIONS are idempotent."""

    def __init__(self, name: str, operation: Operation, caller: Caller) -> None:
        super().__init__(
            name,
            operation.description,
            operation.schema,
            self._run,
            idempotent=operation.idempotent,
            timeout=caller.timeout + 1.0,  # the call's own deadline answers first
        )
        self.operation = operation
        self._caller = caller

    async def _run(self, args: dict[str, Any]) -> ToolOutcome:
        return await self._caller.call(self.operation, args)

    def request(self, args: Mapping[str, Any]) -> tuple[str, dict[str, str], list[Any]]:
        """The URL, headers and query a call with `args` would send (credentials included):
        for checking a document's mapping without a server."""
        url, parts, _ = self._caller.request(self.operation, args)
        return url, parts.headers, parts.params

    @property
    def secrets(self) -> tuple[str, ...]:
        """The credentials this tool sends, to be kept out of the log."""
        return self._caller.credentials.secrets

    def credentials_hook(self) -> Callable[[str], str]:
        """A redaction hook (`AgentBuilder.redact`) that hides the credentials."""
        return self._caller.credentials.hook()

    def __repr__(self) -> str:
        return f"<OpenApiTool {self.name!r} {self.operation.label}>"


def _names(given: Iterable[str] | None, what: str) -> list[str] | None:
    if given is None:
        return None
    if isinstance(given, str):
        return [given]
    names = list(given)
    if not all(isinstance(n, str) for n in names):
        raise BuildError(f"openapi({what}=...) takes names as strings, not {names!r}.")
    return names


def _under(path: str, prefix: str) -> bool:
    """`path` is `prefix` or below it, segment by segment (`/pet` takes `/pet/{id}`, not
    `/petfood`)."""
    stem = prefix.rstrip("/")
    return path == stem or path.startswith(stem + "/")


class OpenApi:
    """A loaded document: `operations` (those with an operationId, in the document's order)
    and `skipped` (the operations it cannot offer, each with the reason)."""

    def __init__(self, document: Document, *, max_schema_chars: int = 20_000) -> None:
        self.document = document
        self.operations, self.skipped = read_operations(document, max_schema_chars=max_schema_chars)

    @classmethod
    def load(
        cls,
        spec: str | Path | Mapping[str, Any],
        *,
        timeout: float = 30.0,
        max_schema_chars: int = 20_000,
    ) -> OpenApi:
        """Read a document from a file path, an http(s) URL (fetched now), its JSON or YAML
        text, or a dict; a document that is not OpenAPI 3 is a BuildError. Each operation's
        schema inlines its `$ref`s as deep as keeps it within `max_schema_chars` characters
        of JSON (deeper ones are described, not expanded: the server still checks them)."""
        return cls(Document.load(spec, timeout=timeout), max_schema_chars=max_schema_chars)

    @property
    def title(self) -> str:
        return self.document.title

    def select(
        self,
        operations: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        paths: Iterable[str] | None = None,
    ) -> list[Operation]:
        """The operations that pass every filter given: their operation id (or tool name) is
        among `operations`, they carry one of `tags`, their path is one of `paths` or below it.
        A name, tag or prefix that matches nothing is a BuildError."""
        ops = self.operations
        if not ops:
            raise BuildError(
                f"The document {self.document.label} offers no operation with an operationId "
                f"({len(self.skipped)} without one or that cannot be offered)."
            )
        wanted, tag_list, prefixes = (
            _names(operations, "operations"),
            _names(tags, "tags"),
            _names(paths, "paths"),
        )
        if wanted is not None:
            by_name = dict(zip(tool_names([o.operation_id for o in ops]), ops, strict=True))
            by_name.update({o.operation_id: o for o in ops})
            missing = [n for n in wanted if n not in by_name]
            if missing:
                skipped = {s.operation_id: s.reason for s in self.skipped if s.operation_id}
                raise BuildError(self._unknown(missing[0], list(by_name), skipped))
            ids = {by_name[n].operation_id for n in wanted}
            ops = [o for o in ops if o.operation_id in ids]
        if tag_list is not None:
            known = {t for o in self.operations for t in o.tags}
            for tag in tag_list:
                if tag not in known:
                    raise BuildError(
                        f"No operation of {self.title} has the tag {tag!r} "
                        f"(its tags: {', '.join(sorted(known)) or 'none'})."
                    )
            ops = [o for o in ops if set(o.tags) & set(tag_list)]
        if prefixes is not None:
            for prefix in prefixes:
                if not any(_under(o.path, prefix) for o in self.operations):
                    raise BuildError(f"No path of {self.title} starts with {prefix!r}.")
            ops = [o for o in ops if any(_under(o.path, p) for p in prefixes)]
        if not ops:
            raise BuildError(f"No operation of {self.title} passes all the filters given.")
        return ops

    def _unknown(self, name: str, known: list[str], skipped: dict[str, str]) -> str:
        if name in skipped:
            return f"Operation {name!r} of {self.title} cannot be offered: {skipped[name]}."
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        return f"{self.title} has no operation {name!r}.{hint}"

    def tools(
        self,
        *,
        base_url: str | None = None,
        auth: Auth | None = None,
        operations: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        paths: Iterable[str] | None = None,
        timeout: float = 30.0,
        max_response_bytes: int = 20_000,
        prefix: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> list[OpenApiTool]:
        """A tool for each selected operation (see `select`), named after its operation id
        (`prefix` first) as every provider accepts."""
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise BuildError(f"openapi(timeout=...) must be a positive number, not {timeout!r}.")
        if isinstance(max_response_bytes, bool) or not isinstance(max_response_bytes, int):
            raise BuildError(f"max_response_bytes must be an int, not {max_response_bytes!r}.")
        if max_response_bytes <= 0:
            raise BuildError(f"max_response_bytes must be positive, not {max_response_bytes}.")
        if prefix and not (prefix[0].isascii() and prefix[0].isalpha()):
            raise BuildError(f"openapi(prefix={prefix!r}) must start with a letter.")
        selected = self.select(operations, tags, paths)
        default = self.document.server()
        if base_url is None and default is None and any(o.server is None for o in selected):
            raise BuildError(
                f"The document {self.document.label} names no absolute server URL; give "
                "base_url='https://...'."
            )
        if base_url is not None and not base_url.startswith(("http://", "https://")):
            raise BuildError(f"base_url must be an http(s) URL, not {base_url!r}.")
        caller = Caller(
            base_url=base_url,
            default_url=default,
            credentials=Credentials(self.document, auth),
            timeout=float(timeout),
            max_bytes=max_response_bytes,
            headers=tuple((str(k), str(v)) for k, v in (headers or {}).items()),
        )
        names = tool_names([o.operation_id for o in self.operations], prefix)
        named = {id(o): n for o, n in zip(self.operations, names, strict=True)}
        return [OpenApiTool(named[id(o)], o, caller) for o in selected]

    def __repr__(self) -> str:
        return f"<OpenApi {self.title!r}: {len(self.operations)} operations>"
