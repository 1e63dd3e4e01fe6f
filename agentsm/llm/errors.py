"""Provider failures, classified, with messages a user can act on and no secrets in them.

ProviderError            an LLM provider call failed; `kind` says how
├── AuthenticationFailed  missing or rejected API key (not retried)
├── RateLimited           429 (retried, honouring retry-after)
├── Overloaded            529 / overloaded_error (retried)
├── ContextOverflow       the conversation is longer than the model's context (not retried)
├── BadRequest            400/404/422: the request itself is wrong (not retried)
├── ServerError           5xx (retried)
├── NetworkError          connection failed or timed out (retried)
└── MalformedResponse     the provider answered something that is not a usable response
"""

from __future__ import annotations

import re
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


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return None


def _detail(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(error, "message", None) or error)


def classify(
    error: BaseException, provider: str, key_env: str, *secrets: str | None
) -> ProviderError:
    """Turn an SDK exception into a ProviderError of the right kind."""
    if isinstance(error, ProviderError):
        return error
    status = getattr(error, "status_code", None)
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    detail = redact(_detail(error), *secrets)
    name = type(error).__name__
    where = f"{provider} API"
    if status is None:
        if "Timeout" in name or "Connection" in name or isinstance(error, OSError | TimeoutError):
            return NetworkError(f"{where} could not be reached: {detail}")
        return MalformedResponse(f"{where} gave an unusable response: {name}: {detail}")
    if status in (401, 403):
        return AuthenticationFailed(
            f"{where} rejected the credentials ({status}): {detail}. Check {key_env}.",
            status=status,
        )
    if status == 429:
        return RateLimited(
            f"{where} rate limit (429): {detail}", status=status, retry_after=_retry_after(headers)
        )
    if status == 529 or "overloaded" in detail.lower() and status >= 500:
        return Overloaded(
            f"{where} is overloaded ({status}): {detail}",
            status=status,
            retry_after=_retry_after(headers),
        )
    if status >= 500:
        return ServerError(
            f"{where} server error ({status}): {detail}",
            status=status,
            retry_after=_retry_after(headers),
        )
    if _CONTEXT.search(detail) or "context_length_exceeded" in str(getattr(error, "body", "")):
        return ContextOverflow(f"context length exceeded: {detail}", status=status)
    if status == 404:
        return BadRequest(
            f"{where}: not found (404): {detail}. Check the model name.", status=status
        )
    return BadRequest(f"{where} refused the request ({status}): {detail}", status=status)
