"""Credentials for an API: added to each request when it is sent, never part of what the LLM
gives or the run records, and handed to the run's redaction hooks in case a server echoes
them."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from ..errors import BuildError
from ..redaction import REDACTED
from ._document import Document
from ._operations import Operation

__all__ = ["ApiKey", "Auth", "Basic", "Bearer", "Credentials", "Parts"]


def _secret(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise BuildError(
            f"The {what} is {'empty' if value == '' else repr(type(value).__name__)}; give the "
            "secret as a non-empty string (is its environment variable set?)."
        )
    return value


@dataclass(frozen=True)
class Bearer:
    """`Authorization: Bearer TOKEN` (also the access token of an OAuth2 or OpenID scheme)."""

    token: str = field(repr=False)

    def __post_init__(self) -> None:
        _secret(self.token, "bearer token")

    def apply(self, parts: Parts) -> None:
        parts.headers["Authorization"] = f"Bearer {self.token}"

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.token,)


@dataclass(frozen=True)
class ApiKey:
    """An API key sent in one header (default `X-API-Key`), query parameter or cookie:
    `ApiKey(key, header="api_key")`, `ApiKey(key, query="key")`."""

    key: str = field(repr=False)
    header: str | None = None
    query: str | None = None
    cookie: str | None = None

    def __post_init__(self) -> None:
        _secret(self.key, "API key")
        places = [p for p in (self.header, self.query, self.cookie) if p is not None]
        if len(places) > 1 or any(not isinstance(p, str) or not p for p in places):
            raise BuildError(
                "ApiKey takes one place for the key: header=NAME, query=NAME or cookie=NAME."
            )
        if not places:
            object.__setattr__(self, "header", "X-API-Key")

    def apply(self, parts: Parts) -> None:
        if self.header is not None:
            parts.headers[self.header] = self.key
        elif self.query is not None:  # in place of a parameter of the same name
            parts.params[:] = [p for p in parts.params if p[0] != self.query]
            parts.params.append((self.query, self.key))
        elif self.cookie is not None:
            parts.cookies.append(f"{self.cookie}={self.key}")

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.key,)


@dataclass(frozen=True)
class Basic:
    """HTTP basic authentication (the password is the secret; the user name is not hidden)."""

    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        _secret(self.password, "password")

    @property
    def _encoded(self) -> str:
        return base64.b64encode(f"{self.username}:{self.password}".encode()).decode()

    def apply(self, parts: Parts) -> None:
        parts.headers["Authorization"] = f"Basic {self._encoded}"

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.password, self._encoded)


Credential = Bearer | ApiKey | Basic
Auth = str | Credential | Mapping[str, Any]
"""A bearer token, a credential for every operation, or credentials by the name of the
document's security schemes (`{"api_key": "...", "oauth": "..."}`), sent where each
operation's `security` asks for them."""


@dataclass
class Parts:
    """The parts of a request the parameters and the credentials add to."""

    headers: dict[str, str] = field(default_factory=dict)
    params: list[tuple[str, str]] = field(default_factory=list)
    cookies: list[str] = field(default_factory=list)


def _for_scheme(doc: Document, name: str, value: Any) -> Credential:
    schemes = (doc.data.get("components") or {}).get("securitySchemes") or {}
    if name not in schemes:
        known = ", ".join(schemes) or "none"
        raise BuildError(
            f"auth names the security scheme {name!r}, which the document {doc.label} does not "
            f"define (its schemes: {known})."
        )
    if isinstance(value, Bearer | ApiKey | Basic):
        return value
    scheme = doc.deref(schemes[name])
    kind = str(scheme.get("type", "")).lower()
    what = f"the secret of scheme {name!r}"
    if kind == "apikey" and scheme.get("in") in ("header", "query", "cookie"):
        return ApiKey(_secret(value, what), **{str(scheme["in"]): str(scheme.get("name"))})
    if kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
        if isinstance(value, tuple | list) and len(value) == 2:
            return Basic(str(value[0]), _secret(value[1], what))
        raise BuildError(f"Scheme {name!r} is HTTP basic: give (username, password).")
    if (kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer") or kind in (
        "oauth2",
        "openidconnect",
    ):
        return Bearer(_secret(value, what))
    raise BuildError(
        f"Scheme {name!r} ({kind or 'no type'}) is not supported; give a Bearer, ApiKey or "
        "Basic credential for it instead."
    )


class Credentials:
    """What `auth` adds to each operation's requests, and the secrets to keep out of the log."""

    def __init__(self, doc: Document, auth: Auth | None) -> None:
        self._every: Credential | None = None
        self._by_scheme: dict[str, Credential] = {}
        if auth is None:
            pass
        elif isinstance(auth, str):
            self._every = Bearer(auth)
        elif isinstance(auth, Bearer | ApiKey | Basic):
            self._every = auth
        elif isinstance(auth, Mapping):
            self._by_scheme = {str(k): _for_scheme(doc, str(k), v) for k, v in auth.items()}
        else:
            raise BuildError(
                f"auth takes a bearer token, a Bearer, ApiKey or Basic, or a dict of secrets by "
                f"security scheme name, not {type(auth).__name__}."
            )

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every secret and the forms it travels in (URL-encoded), longest first."""
        found: set[str] = set()
        for credential in [self._every, *self._by_scheme.values()]:
            for secret in credential.secrets if credential is not None else ():
                found.update({secret, quote(secret, safe="")})
        return tuple(sorted(found, key=lambda s: (-len(s), s)))

    def hook(self) -> Callable[[str], str]:
        """A redaction hook that replaces each secret with `[REDACTED]`."""
        secrets = self.secrets

        def hide_credentials(text: str) -> str:
            for secret in secrets:
                if secret in text:
                    text = text.replace(secret, REDACTED)
            return text

        return hide_credentials

    def apply(self, op: Operation, parts: Parts) -> None:
        """Add the credentials `op` needs to a request's parts."""
        if self._every is not None:
            self._every.apply(parts)
            return
        for alternative in op.security or ():
            if alternative and all(name in self._by_scheme for name in alternative):
                for name in alternative:
                    self._by_scheme[name].apply(parts)
                return
