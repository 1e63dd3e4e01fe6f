"""Sending spans over OTLP/HTTP: the collector's traces URL, a quick look that something
listens there, the SDK's own loggers kept quiet, and a tracer provider that reports an
unreachable collector once, in one line (`pip install 'agentsm[otel]'`)."""

from __future__ import annotations

import logging
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["otlp_provider", "quiet_sdk_logs", "traces_url", "unreachable"]


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector given by its base URL (as
    OTEL_EXPORTER_OTLP_ENDPOINT is: `/v1/traces` is added) or by its full traces URL."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"--endpoint {endpoint!r} is not an http(s) URL; give the collector's OTLP/HTTP "
            "address, e.g. http://localhost:4318."
        )
    if parts.path.rstrip("/") == "":
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


def unreachable(url: str, timeout: float = 2.0) -> str | None:
    """Why nothing accepts a TCP connection at the host:port of `url` within `timeout`
    seconds (e.g. "Connection refused"), or None when something does: a quick look before
    an export that the SDK would otherwise retry for many seconds."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "localhost", port), timeout=timeout):
            return None
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__


_quieted = 0
_quiet_lock = threading.Lock()
_quiet_level = logging.NOTSET


@contextmanager
def quiet_sdk_logs() -> Iterator[None]:
    """Within the block, the OpenTelemetry SDK's own loggers (retries, failed batches) say
    nothing: whoever exports reports the outcome in its own words."""
    global _quieted, _quiet_level
    sdk = logging.getLogger("opentelemetry")
    with _quiet_lock:
        if _quieted == 0:
            _quiet_level = sdk.level
            sdk.setLevel(logging.CRITICAL + 1)
        _quieted += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quieted -= 1
            if _quieted == 0:
                sdk.setLevel(_quiet_level)


class _Checked(SpanExporter):
    """An exporter that first looks whether the collector takes connections (so an absent one
    costs no retries and no wait at exit) and reports a failure in one line, once until an
    export succeeds again."""

    def __init__(self, inner: SpanExporter, url: str, on_error: Callable[[str], None]) -> None:
        self.inner = inner
        self.url = url
        self.on_error = on_error
        self._failing = False

    def check(self) -> bool:
        """Whether the collector takes connections now (reported when it does not)."""
        problem = unreachable(self.url)
        if problem is not None:
            self._fail(f"no OTLP collector accepts connections at {self.url} ({problem})")
        return problem is None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.check():
            return SpanExportResult.FAILURE
        with quiet_sdk_logs():
            result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            self._failing = False
        else:
            self._fail(f"the OTLP collector at {self.url} did not take {len(spans)} spans")
        return result

    def _fail(self, message: str) -> None:
        if not self._failing:
            self._failing = True
            self.on_error(f"{message}; spans are dropped until it does.")

    def shutdown(self) -> None:
        with quiet_sdk_logs():
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def __repr__(self) -> str:
        return f"_Checked(url={self.url!r}, failing={self._failing})"


def otlp_provider(
    endpoint: str,
    *,
    service_name: str = "agentsm",
    on_error: Callable[[str], None] | None = None,
) -> SdkTracerProvider:
    """A tracer provider that batches spans to an OTLP/HTTP collector (shut it down to flush).
    A collector that cannot be reached is said once, in one line, to `on_error` (default: a
    warning on this module's logger), and costs no retries; the spans of that time are lost."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    url = traces_url(endpoint)
    exporter = _Checked(OTLPSpanExporter(url), url, on_error or logging.getLogger(__name__).warning)
    exporter.check()
    provider = SdkTracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
