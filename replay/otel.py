"""Runs as OpenTelemetry traces, following the GenAI semantic conventions (`pip install
'agentsm[otel]'`): an `invoke_agent` span per run, a `chat` span per LLM call (model, token
usage, finish reasons) and an `execute_tool` span per tool call, errors as span status.

Spans are made from the facts of the log, so a run gives the same spans live
(`traced(engine)`) and after the fact (`export_spans(store, run_id)`), at the times the facts
were recorded. Message content (answers, tool arguments and results, the system prompt) goes
into spans only with `capture_content=True`; it is the recorded text, which redaction hooks
have already rewritten, so a redacted value never reaches a span. Without it a span holds no
recorded text at all: a failure's status and events name its error class only.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from agentsm import AgentEngine, AgentMemory, ToolCall
from agentsm import facts as f
from agentsm.skills import with_skill_index
from agentsm.trace import Trace
from eventstore import EventStore

from .source import resolve_run

__all__ = [
    "RunSpans",
    "export_spans",
    "otlp_provider",
    "quiet_sdk_logs",
    "traced",
    "traces_url",
    "unreachable",
]

SCOPE = "agentsm"


def _ns(timestamp: float) -> int:
    return int(timestamp * 1_000_000_000)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class RunSpans:
    """Turns the facts of one run, in order, into its spans. `add` each fact with the time it
    was recorded; `close` ends whatever is still open (a run that waits, or was cut short)."""

    def __init__(
        self,
        tracer: Tracer,
        run_id: str,
        definition: f.RunStarted,
        *,
        capture_content: bool = False,
    ) -> None:
        self.tracer = tracer
        self.run_id = run_id
        self.definition = definition
        self.capture_content = capture_content
        self.provider = str(definition.llm.get("provider") or "") or None
        self._agent: Span | None = None
        self._chat: Span | None = None
        self._tools: list[tuple[ToolCall, Span]] = []  # started, not yet executed, in order
        self._closed = False
        self._error: tuple[str, str] | None = None  # how the run failed, if its last word

    @property
    def agent_span(self) -> Span | None:
        """The run's `invoke_agent` span, once the first fact has started it."""
        return self._agent

    def add(self, fact: f.Fact, timestamp: float) -> None:
        """One more fact of the run, recorded at `timestamp` (seconds since the epoch)."""
        if self._closed:
            return
        at = _ns(timestamp)
        agent = self._agent or self._start_agent(at)
        self._error = None  # the run went on: an abort before it is history, not its outcome
        if isinstance(fact, f.LlmRequested):
            self._end_chat(at)
            attributes = self._common("chat") | {"agentsm.llm.purpose": str(fact.purpose)}
            if fact.model:  # none: the caller's own default
                attributes["gen_ai.request.model"] = fact.model
            self._chat = self.tracer.start_span(
                f"chat {fact.model}".strip(),
                context=trace.set_span_in_context(agent),
                kind=SpanKind.CLIENT,
                attributes=attributes,
                start_time=at,
            )
        elif isinstance(fact, f.LlmResponded) and self._chat is not None:
            self._responded(self._chat, fact.response)
            self._end_chat(at)
        elif isinstance(fact, f.LlmFailed) and self._chat is not None:
            self._chat.set_attribute("error.type", fact.error_type)
            said = self._said(fact.error_type, f"{fact.error_type}: {fact.message}")
            self._chat.set_status(Status(StatusCode.ERROR, said))
            self._end_chat(at)
        elif isinstance(fact, f.ToolCallStarted) and fact.call is not None:
            self._abandon(at, fact.call)  # started again: the earlier attempt was cut short
            self._tools.append((fact.call, self._start_tool(agent, fact.call, at)))
        elif isinstance(fact, f.ApprovalRequested) and fact.reason == "outcome_unknown":
            self._abandon(at)  # the process stopped while these ran
        elif isinstance(fact, f.ToolExecuted):
            self._executed(fact, at)
        elif isinstance(fact, f.RunFinished):
            if fact.status == "failed":
                self._error = ("RunFailed", self._said("RunFailed", fact.error or "the run failed"))
            elif self.capture_content and fact.final_answer is not None:
                agent.set_attribute("agentsm.final_answer", fact.final_answer)
            self.close(timestamp, status=fact.status)
        elif isinstance(fact, f.RunAborted):  # it stops here, unless it is resumed later
            self._end_chat(at)
            self._abandon(at)
            details: dict[str, Any] = {"error.type": fact.error_type}
            if self.capture_content:
                details["message"] = fact.message
            agent.add_event("agentsm.run.aborted", details, timestamp=at)
            self._error = (
                fact.error_type,
                self._said(fact.error_type, f"{fact.error_type}: {fact.message}"),
            )

    def close(self, timestamp: float | None = None, *, status: str | None = None) -> None:
        """End every open span at `timestamp` (default: now); `status` is the run's, as the
        catalog says. A tool still running is marked with an unknown outcome."""
        if self._closed:
            return
        self._closed = True
        at = _ns(time.time() if timestamp is None else timestamp)
        if self._agent is None:
            return
        self._end_chat(at)
        self._abandon(at)
        if self._error is not None:
            self._agent.set_attribute("error.type", self._error[0])
            self._agent.set_status(Status(StatusCode.ERROR, self._error[1]))
        if status is not None:
            self._agent.set_attribute("agentsm.run.status", status)
        self._agent.end(end_time=at)

    # -- the spans ----------------------------------------------------------------------------

    def _said(self, error_type: str, text: str) -> str:
        """A failure's status description: its class, and the recorded text only when content
        is captured (an error message may quote a task, an argument or a result)."""
        return text if self.capture_content else error_type

    def _common(self, operation: str) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.conversation.id": self.run_id,
        }
        if self.provider:
            attributes["gen_ai.provider.name"] = self.provider
        return attributes

    def _start_agent(self, at: int) -> Span:
        d = self.definition
        attributes = self._common("invoke_agent") | {
            "gen_ai.agent.id": self.run_id,
            "gen_ai.agent.name": d.task_type,
            "agentsm.run.id": self.run_id,
        }
        model = d.config.models.get(d.task_type) or d.config.models.get("default")
        if model:
            attributes["gen_ai.request.model"] = model
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _json(
                [{"role": "user", "parts": [{"type": "text", "content": d.task}]}]
            )
            system = with_skill_index(d.system_prompt, d.skills)  # as the LLM was sent it
            if system:
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": system}]
                )
        self._agent = self.tracer.start_span(
            f"invoke_agent {d.task_type}",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=at,
        )
        return self._agent

    def _responded(self, span: Span, response: Any) -> None:
        finish = response.stop_reason or ("tool_calls" if response.calls else "stop")
        span.set_attribute("gen_ai.response.finish_reasons", [finish])
        if response.model:
            span.set_attribute("gen_ai.response.model", response.model)
        if response.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
        if self.capture_content:
            parts: list[dict[str, Any]] = []
            if response.content:
                parts.append({"type": "text", "content": response.content})
            parts += [
                {"type": "tool_call", "id": c.id, "name": c.name, "arguments": dict(c.args)}
                for c in response.calls
            ]
            message = {"role": "assistant", "parts": parts, "finish_reason": finish}
            span.set_attribute("gen_ai.output.messages", _json([message]))

    def _end_chat(self, at: int) -> None:
        if self._chat is not None:
            self._chat.end(end_time=at)
            self._chat = None

    def _start_tool(self, agent: Span, call: ToolCall, at: int) -> Span:
        attributes = self._common("execute_tool") | {
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(dict(call.args))
        return self.tracer.start_span(
            f"execute_tool {call.name}",
            context=trace.set_span_in_context(agent),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=at,
        )

    def _abandon(self, at: int, call: ToolCall | None = None) -> None:
        """End the spans of running calls (all, or those of `call`) whose outcome the run
        never learnt: the process stopped while they ran."""
        for started, span in [(c, s) for c, s in self._tools if call is None or c == call]:
            span.set_attribute("agentsm.tool.outcome", "unknown")
            span.end(end_time=at)
            self._tools.remove((started, span))

    def _executed(self, fact: f.ToolExecuted, at: int) -> None:
        """End the span of the first running call this result is for (by position among the
        calls started, never by the id the LLM chose alone)."""
        found = next((i for i, (call, _) in enumerate(self._tools) if call == fact.call), None)
        if found is None:
            return  # a result of a call started before this trace began
        span = self._tools.pop(found)[1]
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", fact.observation)
        if not fact.success:
            error = fact.error_type or "ToolFailed"
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, self._said(error, fact.observation[:500])))
        span.end(end_time=at)

    def __repr__(self) -> str:
        return f"RunSpans(run_id={self.run_id!r}, closed={self._closed})"


def _tracer(provider: TracerProvider | None) -> Tracer:
    return (provider or trace.get_tracer_provider()).get_tracer(SCOPE)


@contextmanager
def traced(
    engine: AgentEngine,
    *,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool = False,
) -> Iterator[RunSpans]:
    """Make spans of the run while `engine` records it, within the block; what is still open
    at its end (a run waiting for a human) ends with it. Uses the global tracer provider
    unless given one."""
    spans = RunSpans(
        _tracer(tracer_provider),
        engine.run_id,
        engine.definition,
        capture_content=capture_content,
    )

    def observe(seq: int, state: str, fact: f.Fact, memory: AgentMemory) -> None:
        spans.add(fact, time.time())

    engine.observe(observe)
    try:
        yield spans
    finally:
        spans.close(status=None if engine.finished else "unfinished")


def export_spans(
    store: EventStore,
    run_id: str,
    *,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool = False,
) -> RunSpans:
    """Make the spans of a recorded run (an id or a unique prefix), at the times its facts
    were recorded; a run that has not ended gets spans up to its last fact."""
    run_id = resolve_run(store, run_id)
    recorded = Trace.load(store, run_id)
    entries = list(recorded)
    if not entries or not isinstance(entries[0].fact, f.RunStarted):
        raise ValueError(f"Run {run_id} does not begin with RunStarted; it cannot be exported.")
    spans = RunSpans(
        _tracer(tracer_provider), run_id, entries[0].fact, capture_content=capture_content
    )
    for entry in entries:
        spans.add(entry.fact, entry.timestamp)
    spans.close(entries[-1].timestamp, status=store.run(run_id).status)
    return spans


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
