"""boto3's `bedrock-runtime` client behind an async face, and its errors classified.

boto3 blocks: each call (a ConverseStream with all its reads) runs on a thread of its own so
the event loop goes on; the client itself is made on one at first use (boto3 reads its service
models then)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncGenerator, Callable
from functools import partial
from typing import Any, TypeVar

from .errors import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    MalformedResponse,
    NetworkError,
    Overloaded,
    ProviderError,
    RateLimited,
    ServerError,
    _retry_after,
    classify,
    redact,
)

__all__ = ["AsyncBedrock", "classify_aws"]

T = TypeVar("T")

CREDENTIALS_HELP = (
    "pass aws_access_key_id= and aws_secret_access_key= (or profile=) to BedrockCaller, or set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
)


class AsyncBedrock:
    """`await converse(...)` and `async for event in converse_stream(...)` on a boto3 client
    made by `make` on first use; `await close()` closes its connection pool.

    Each call runs on a daemon thread of its own (a stream's thread reads every event and hands
    them to the loop): a call abandoned at a deadline may hold its thread until boto3's read
    timeout, and keeps neither other calls, the loop's shutdown nor the process's exit waiting."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None
        self._lock = asyncio.Lock()

    async def _ready(self) -> Any:
        async with self._lock:
            if self._client is None:
                self._client = await off_loop(self._make)
        return self._client

    async def converse(self, **request: Any) -> dict[str, Any]:
        client = await self._ready()
        return await off_loop(partial(client.converse, **request))

    async def converse_stream(self, **request: Any) -> AsyncGenerator[dict[str, Any], None]:
        """The stream's events as they arrive; the stream is closed at its end, on an error,
        or when the caller stops early (a deadline too)."""
        client = await self._ready()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        opened: list[Any] = []
        stop = threading.Event()

        def hand(kind: str, value: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, (kind, value))
            except RuntimeError:  # the loop is closed: nobody reads any more
                stop.set()

        def pump() -> None:
            try:
                opened.append(client.converse_stream(**request)["stream"])
                for event in opened[0]:
                    if stop.is_set():
                        return
                    hand("event", event)
                hand("end", None)
            except BaseException as e:  # handed to the loop, raised there
                hand("error", e)
            finally:
                for stream in opened:
                    stream.close()

        threading.Thread(target=pump, name="agentsm-bedrock", daemon=True).start()
        try:
            while True:
                kind, value = await queue.get()
                if kind == "error":
                    raise value
                if kind == "end":
                    return
                yield value
        finally:
            stop.set()
            for stream in opened:  # ends a read in flight
                stream.close()

    async def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def __repr__(self) -> str:
        return f"AsyncBedrock(open={self._client is not None})"


async def off_loop(function: Callable[[], T]) -> T:
    """`function()` on a daemon thread; its result or exception comes back to the loop (and is
    dropped if the loop has closed by then)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def work() -> None:
        try:
            value = function()
        except BaseException as e:
            outcome = partial(done.set_exception, e)
        else:
            outcome = partial(done.set_result, value)
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:  # the loop is closed: nobody waits
            pass

    threading.Thread(target=work, name="agentsm-bedrock", daemon=True).start()
    return await done


_AUTH = frozenset(
    {
        "accessdenied",
        "unrecognizedclient",
        "invalidsignature",
        "signaturedoesnotmatch",
        "incompletesignature",
        "expiredtoken",
        "invalidclienttokenid",
        "missingauthenticationtoken",
    }
)
_RATE = frozenset({"throttling", "servicequotaexceeded", "toomanyrequests"})
_BUSY = frozenset({"modelnotready", "serviceunavailable"})
_SERVER = frozenset({"internalserver", "modelstreamerror", "modelerror", "modeltimeout"})
_CONTEXT = re.compile(
    r"too long|too many (input )?tokens|context (length|window)|maximum context|exceeds? the "
    r"(max|limit)",
    re.I,
)


def _code(raw: str) -> str:
    """`ThrottlingException` and `throttlingException` (a stream's event) alike: "throttling"."""
    code = raw.split(":", 1)[0].strip().lower()
    return code.removesuffix("exception")


def classify_aws(error: BaseException, where: str, *secrets: str | None) -> ProviderError:
    """An exception of boto3 or botocore as a ProviderError of the right kind (others as the
    SDK-neutral `classify` says). The error's code decides (`ThrottlingException` is retried,
    `ValidationException` is a bad request); credentials never reach the message."""
    from botocore import exceptions as bx  # loaded with boto3, which raised this

    if isinstance(error, ProviderError):
        return error
    if isinstance(error, bx.ClientError):
        return _client_error(error, where, secrets)
    detail = redact(str(error), *secrets)
    if isinstance(
        error, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError
    ):
        return AuthenticationFailed(
            f"{where}: no usable AWS credentials ({detail}): " + CREDENTIALS_HELP + "."
        )
    if isinstance(error, bx.ProfileNotFound):
        return AuthenticationFailed(
            f"{where}: {detail}. Name a profile of ~/.aws/config, or " + CREDENTIALS_HELP + "."
        )
    if isinstance(error, bx.NoRegionError):
        return BadRequest(
            f"{where}: no AWS region is set: pass region= to BedrockCaller, or set AWS_REGION."
        )
    if isinstance(error, bx.ParamValidationError):
        return BadRequest(f"{where}: boto3 refused the request before sending it: {detail}")
    if isinstance(error, bx.HTTPClientError | bx.ConnectionError) or type(
        error
    ).__module__.startswith("urllib3"):
        return NetworkError(
            f"{where} could not be reached or dropped the connection: "
            f"{type(error).__name__}: {detail}"
        )
    if type(error).__module__.startswith("botocore.eventstream"):
        return MalformedResponse(f"{where} sent a broken event stream: {detail}")
    return classify(error, where, "AWS_ACCESS_KEY_ID", *secrets)


def _client_error(error: Any, where: str, secrets: tuple[str | None, ...]) -> ProviderError:
    reply = error.response or {}
    shown = str((reply.get("Error") or {}).get("Code") or "").split(":", 1)[0]
    code = _code(shown)
    detail = redact(str((reply.get("Error") or {}).get("Message") or error), *secrets)
    meta = reply.get("ResponseMetadata") or {}
    status = meta.get("HTTPStatusCode")
    status = status if isinstance(status, int) and status >= 400 else None
    headers = meta.get("HTTPHeaders") or {}
    named = f"{where}: {shown}" if shown else where
    if code in _AUTH or status in (401, 403):
        return AuthenticationFailed(
            f"{named}, credentials refused ({status or 403}): {detail.rstrip('.')}. Check "
            "the AWS "
            "credentials: " + CREDENTIALS_HELP + ", with access to this model.",
            status=status,
        )
    wait = _retry_after(headers)
    if code in _RATE or status == 429 and code not in _BUSY:
        return RateLimited(
            f"{named}, rate limit ({status or 429}): {detail}", status=status, retry_after=wait
        )
    if code in _BUSY:
        return Overloaded(
            f"{named}, busy ({status or 503}): {detail}", status=status, retry_after=wait
        )
    if code in _SERVER or (status or 0) >= 500:
        return ServerError(
            f"{named}, server error ({status or 500}): {detail}", status=status, retry_after=wait
        )
    if code == "validation" and _CONTEXT.search(detail):
        return ContextOverflow(f"context length exceeded: {detail}", status=status)
    if code == "resourcenotfound" or "model identifier" in detail:
        return BadRequest(
            f"{named} ({status or 400}): {detail.rstrip('.')}. Check the model id (e.g. "
            "'us.anthropic.claude-sonnet-4-5-20250929-v1:0') and that it is served in this region.",
            status=status,
        )
    if status is None and not code:
        return MalformedResponse(f"{where} gave an unusable response: {detail}")
    return BadRequest(f"{named}, request refused ({status or 400}): {detail}", status=status)
