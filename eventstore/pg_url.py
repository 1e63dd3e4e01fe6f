"""PostgreSQL URLs: the store's own `schema` parameter, and the URL as messages may show it."""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["DEFAULT_SCHEMA", "check_schema_name", "is_postgres_url", "redact", "split_schema"]

DEFAULT_SCHEMA = "agentsm"
"""The schema the log's tables live in unless the URL or the caller names another."""

_SCHEMES = ("postgresql://", "postgres://")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


def is_postgres_url(text: str) -> bool:
    """Whether `text` is a `postgresql://` or `postgres://` URL."""
    return text.lower().startswith(_SCHEMES)


def split_schema(url: str) -> tuple[str, str | None]:
    """The URL without its `schema=` query parameter (which libpq does not know), and that
    parameter's value if it had one."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in query if key == "schema"]
    rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "schema"])
    return urllib.parse.urlunsplit(parts._replace(query=rest)), (schemas[-1] if schemas else None)


def check_schema_name(schema: str) -> str:
    """The schema name, if it is a plain identifier (letters, digits, _ and $)."""
    if not _NAME.fullmatch(schema):
        raise ValueError(
            f"schema {schema!r} is not a plain PostgreSQL name: use letters, digits and _, "
            "starting with a letter, at most 63 characters."
        )
    return schema


def redact(url: str) -> str:
    """The URL without its password, fit for messages and reprs."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "password" for key, _ in query):
        kept = [(k, v) for k, v in query if k != "password"]
        parts = parts._replace(query=urllib.parse.urlencode(kept))
    if parts.password is None:
        return urllib.parse.urlunsplit(parts)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username or ''}@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
