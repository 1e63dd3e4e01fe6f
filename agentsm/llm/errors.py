"""Provider failures, classified, with messages a user can act on and no secrets in them.

ProviderError            an LLM provider call failed; `kind` says how
├── AuthenticationFailed  missing or rejected API key (not retried)
├── RateLimited           429 / rate_limit_error (retried, honouring retry-after)
├── Overloaded            529 / overloaded_error, also mid-stream (retried)
├── ContextOverflow       the conversation is longer than the model's context (not retried)
├── BadRequest            400/404/422: the request itself is wrong (not retried)
├── ServerError           5xx, or an error event mid-stream (retried)
├── NetworkError          connection refused, reset, cut mid-answer, or timed out (retried)
└── MalformedResponse     the provider answered something that is not a usable response
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "ContextOverflow",
    "MalformedResponse",
    "NetworkError",
    "Overloaded",
    "ProviderError",
    "RateLimited",
    "ServerError",
    "classify",
    "redact",
]

_KEYISH = re.compile(r"\b(sk|key|sess)-[A-Za-z0-9_\-*]{6,}")


def redact(text: str, *secrets: str | None) -> str:
    """`text` without the given secrets or anything shaped like an API key."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _KEYISH.sub(lambda m: f"{m.group(1)}-***", text)


class ProviderError(Exception):
    """A failed provider call; the message names the provider, the status and what to do."""

    kind: ClassVar[str] = "provider"
    retryable: ClassVar[bool] = False

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class AuthenticationFailed(ProviderError):
    kind = "authentication"


class RateLimited(ProviderError):
    kind = "rate_limit"
    retryable = True


class Overloaded(ProviderError):
    kind = "overloaded"
    retryable = True


class ContextOverflow(ProviderError):
    kind = "context_overflow"


class BadRequest(ProviderError):
    kind = "bad_request"


class ServerError(ProviderError):
    kind = "server"
    retryable = True


class NetworkError(ProviderError):
    kind = "network"
    retryable = True


class MalformedResponse(ProviderError):
    kind = "bad_response"


_CONTEXT = re.compile(
    r"context[_ ]length|context window|prompt is too long|maximum context|too many tokens",
    re.I,
)

_STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "server_error": 500,
    "overloaded_error": 529,
}
"""Error types the APIs put in an error body, as the status they stand for: an error sent
mid-stream after a 200 (Anthropic's `event: error`) carries only its type."""

_NETWORK = frozenset({"TransportError", "APIConnectionError", "TimeoutException"})
"""Exception classes (of httpx, its fork httpx2, and the SDKs) that mean the connection failed:
refused, reset or cut mid-response, or timed out."""


def _retry_after(headers: Any) -> float | None:
    """Seconds the server asks to wait: `retry-after-ms`, or `retry-after` in seconds or as an
    HTTP date."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            continue
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return None


def _body_error(error: Any) -> dict[str, Any]:
    """The error object of an SDK error's body (`{"error": {...}}` or the object itself)."""
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return inner
    return {}


def _detail(error: Any) -> str:
    inner = _body_error(error)
    if inner.get("message"):
        return str(inner["message"])
    return str(getattr(error, "message", None) or error)


def _is_network(error: BaseException) -> bool:
    if isinstance(error, OSError | TimeoutError):
        return True
    return any(cls.__name__ in _NETWORK for cls in type(error).__mro__)


def classify(error: BaseException, where: str, key_env: str, *secrets: str | None) -> ProviderError:
    """Turn an SDK exception into a ProviderError of the right kind; `where` names the server
    (e.g. "the OpenAI-compatible server at http://127.0.0.1:8000/v1").

    The error body's type decides where it says more than the status: an `overloaded_error`
    sent mid-stream after a 200 is an overload, not a refused request."""
    if isinstance(error, ProviderError):
        return error
    status = getattr(error, "status_code", None)
    headers = getattr(getattr(error, "response", None), "headers", None)
    detail = redact(_detail(error), *secrets)
    error_type = _body_error(error).get("type")
    if error_type in _STATUS_OF_TYPE and (
        status is None or status < 400 or error_type == "overloaded_error"
    ):
        status = _STATUS_OF_TYPE[error_type]
    if status is None:
        if _is_network(error):
            return NetworkError(
                f"{where} could not be reached or dropped the connection: "
                f"{type(error).__name__}: {detail}"
            )
        if _body_error(error):  # an error event in a stream, of a type we do not know
            return ServerError(f"{where} sent an error mid-response: {detail}")
        return MalformedResponse(
            f"{where} gave an unusable response: {type(error).__name__}: {detail}"
        )
    if status < 400:
        return ServerError(f"{where} sent an error after answering {status}: {detail}")
    if status in (401, 403):
        return AuthenticationFailed(
            f"{where} rejected the credentials ({status}): {detail}. Check {key_env}.",
            status=status,
        )
    retry_after = _retry_after(headers)
    if status == 429:
        return RateLimited(
            f"{where} rate limit (429): {detail}", status=status, retry_after=retry_after
        )
    if status == 529 or "overloaded" in detail.lower() and status >= 500:
        return Overloaded(
            f"{where} is overloaded ({status}): {detail}", status=status, retry_after=retry_after
        )
    if status >= 500:
        return ServerError(
            f"{where} server error ({status}): {detail}", status=status, retry_after=retry_after
        )
    if _CONTEXT.search(detail) or "context_length_exceeded" in str(getattr(error, "body", "")):
        return ContextOverflow(f"context length exceeded: {detail}", status=status)
    if status == 404:
        return BadRequest(
            f"{where}: not found (404): {detail}. Check the model name.", status=status
        )
    return BadRequest(f"{where} refused the request ({status}): {detail}", status=status)
