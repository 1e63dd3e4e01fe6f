"""Runs as OpenTelemetry traces, following the GenAI semantic conventions (`pip install
'agentsm[otel]'`): an `invoke_agent` span per run, a `chat` span per LLM call (provider,
request settings, response id, token usage, finish reasons) and an `execute_tool` span per
tool call, errors as span status; a sub-agent's run nests under the `execute_tool` span of
the call that started it, in its parent's trace.

Spans are made from the facts of the log, so a run gives the same spans live
(`traced(engine)`) and after the fact (`export_spans(store, run_id)`), at the times the facts
were recorded. Message content (messages in and out, tool arguments and results, the system
prompt) goes into spans only with `capture_content=True`; it is the recorded text, which
redaction hooks have already rewritten, so a redacted value never reaches a span. Without it
a span holds no recorded text at all: a failure's status and events name its error class only.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from agentsm import AgentEngine, AgentMemory, LlmResponse, ToolCall
from agentsm import facts as f
from agentsm.memory import scan
from agentsm.skills import with_skill_index
from agentsm.subagent import children_of
from agentsm.trace import Trace
from eventstore import EventStore

from .otlp import otlp_provider, quiet_sdk_logs, traces_url, unreachable
from .semconv import (
    input_messages,
    output_message,
    provider_attributes,
    request_attributes,
    server_attributes,
    usage_attributes,
)
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
    was recorded (and its seq, and the memory right after it, where known); `close` ends
    whatever is still open (a run that waits, or was cut short).

    With `store`, the run's sub-agent runs are read from it and nested under the
    `execute_tool` span of the call that started each (when that call ends, or at `close`);
    `context` is the parent of the run's own `invoke_agent` span (none: a trace of its own).
    """

    def __init__(
        self,
        tracer: Tracer,
        run_id: str,
        definition: f.RunStarted,
        *,
        capture_content: bool = False,
        store: EventStore | None = None,
        context: Context | None = None,
    ) -> None:
        self.tracer = tracer
        self.run_id = run_id
        self.definition = definition
        self.capture_content = capture_content
        self.store = store
        self.context = context
        config = definition.config
        self.model = config.models.get(definition.task_type) or config.models.get("default")
        """The model the run asks for (None: its caller's own default)."""
        self._provider = provider_attributes(definition.llm, self.model or "")
        self.provider = self._provider["gen_ai.provider.name"]
        self._requested = request_attributes(definition.llm)
        self._described = {t.name: t.description for t in definition.tools}
        self._agent: Span | None = None
        self._chat: Span | None = None
        self._tools: list[tuple[ToolCall, Span]] = []  # started, not yet executed, in order
        self._step = 0
        self._first_start: dict[tuple[int, int], int] = {}  # (step, place): first start's seq
        self._span_of: dict[int, Span] = {}  # by that seq: the span of its latest start
        self._nested: set[str] = set()  # the sub-agent runs whose spans are made
        self._closed = False
        self._error: tuple[str, str] | None = None  # how the run failed, if its last word

    @property
    def agent_span(self) -> Span | None:
        """The run's `invoke_agent` span, once the first fact has started it."""
        return self._agent

    @property
    def agent_name(self) -> str | None:
        """The agent's recorded name; a sub-agent without one is named after its tool."""
        d = self.definition
        return d.name or (d.parent_call.tool if d.parent_call is not None else None)

    def add(
        self,
        fact: f.Fact,
        timestamp: float,
        seq: int | None = None,
        memory: AgentMemory | None = None,
    ) -> None:
        """One more fact of the run, recorded at `timestamp` (seconds since the epoch) at
        `seq`; `memory` is the run's memory right after it (for the messages of a call, when
        content is captured)."""
        if self._closed:
            return
        at = _ns(timestamp)
        agent = self._agent or self._start_agent(at)
        self._error = None  # the run went on: an abort before it is history, not its outcome
        if isinstance(fact, f.StepStarted):
            self._step = fact.step
        elif isinstance(fact, f.LlmRequested):
            self._end_chat(at)
            self._chat = self._start_chat(agent, fact, at, memory)
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
            span = self._start_tool(agent, fact.call, at)
            self._tools.append((fact.call, span))
            if seq is not None and fact.index is not None:
                first = self._first_start.setdefault((self._step, fact.index), seq)
                self._span_of[first] = span
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
        catalog says. A tool still running is marked with an unknown outcome; sub-agent runs
        not nested yet are nested now."""
        if self._closed:
            return
        self._closed = True
        at = _ns(time.time() if timestamp is None else timestamp)
        if self._agent is None:
            return
        self._end_chat(at)
        self._abandon(at)
        self._nest(None)
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
        thread = self.definition.thread
        return {
            "gen_ai.operation.name": operation,
            **self._provider,
            "gen_ai.conversation.id": thread.id if thread is not None else self.run_id,
        }

    def _system(self) -> str:
        d = self.definition
        return with_skill_index(d.system_prompt, d.skills)  # as the LLM was sent it

    def _start_agent(self, at: int) -> Span:
        d = self.definition
        name = self.agent_name
        attributes = self._common("invoke_agent") | {
            "gen_ai.agent.id": self.run_id,
            "agentsm.run.id": self.run_id,
        }
        if name:
            attributes["gen_ai.agent.name"] = name
        if d.parent_call is not None:
            attributes["agentsm.parent_run.id"] = d.parent_call.run_id
        if self.model:
            attributes["gen_ai.request.model"] = self.model
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _json(
                [{"role": "user", "parts": [{"type": "text", "content": d.task}]}]
            )
            if self._system():
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": self._system()}]
                )
        self._agent = self.tracer.start_span(
            f"invoke_agent {name}" if name else "invoke_agent",
            context=self.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=at,
        )
        return self._agent

    def _start_chat(
        self, agent: Span, fact: f.LlmRequested, at: int, memory: AgentMemory | None
    ) -> Span:
        attributes = (
            self._common("chat") | self._requested | {"agentsm.llm.purpose": str(fact.purpose)}
        )
        if fact.model:  # none: the caller's own default
            attributes["gen_ai.request.model"] = fact.model
        if self.capture_content:
            if self._system():
                attributes["gen_ai.system_instructions"] = _json(
                    [{"type": "text", "content": self._system()}]
                )
            # the messages, where the log rebuilds exactly those the call was sent
            if memory is not None and memory.messages_digest() == fact.messages_digest:
                shaped = input_messages(memory.build_messages())
                attributes["gen_ai.input.messages"] = _json(shaped)
        return self.tracer.start_span(
            f"chat {fact.model}".strip(),
            context=trace.set_span_in_context(agent),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=at,
        )

    def _responded(self, span: Span, response: LlmResponse) -> None:
        finish = response.stop_reason or ("tool_calls" if response.calls else "stop")
        span.set_attribute("gen_ai.response.finish_reasons", [finish])
        if response.model:
            span.set_attribute("gen_ai.response.model", response.model)
        if response.response_id:
            span.set_attribute("gen_ai.response.id", response.response_id)
        span.set_attributes(server_attributes(response))
        if response.usage is not None:
            span.set_attributes(usage_attributes(response.usage, self.provider))
        if self.capture_content:
            span.set_attribute("gen_ai.output.messages", _json([output_message(response)]))

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
        if self._described.get(call.name):
            attributes["gen_ai.tool.description"] = self._described[call.name]
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
        first = None if fact.index is None else self._first_start.get((self._step, fact.index))
        if first is not None:
            self._nest(first)
        span.end(end_time=at)

    def _nest(self, first: int | None) -> None:
        """Make the spans of the sub-agent runs started by the call first started at seq
        `first` (None: of every call), under that call's latest `execute_tool` span."""
        if self.store is None or (first is not None and first not in self._span_of):
            return
        for record in children_of(self.store, [self.run_id]):
            if record.run_id in self._nested or first not in (None, record.branch_seq):
                continue
            self._nested.add(record.run_id)
            under = self._span_of.get(record.branch_seq or -1) or self._agent
            _spans_of(
                self.store,
                record.run_id,
                self.tracer,
                capture_content=self.capture_content,
                context=trace.set_span_in_context(under) if under is not None else None,
            )

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
    at its end (a run waiting for a human) ends with it. Its sub-agent runs are read from the
    engine's store when their call ends. Uses the global tracer provider unless given one."""
    spans = RunSpans(
        _tracer(tracer_provider),
        engine.run_id,
        engine.definition,
        capture_content=capture_content,
        store=engine.store,
    )

    def observe(seq: int, state: str, fact: f.Fact, memory: AgentMemory) -> None:
        spans.add(fact, time.time(), seq, memory)

    engine.observe(observe)
    try:
        yield spans
    finally:
        spans.close(status=None if engine.finished else "unfinished")


def _spans_of(
    store: EventStore,
    run_id: str,
    tracer: Tracer,
    *,
    capture_content: bool,
    context: Context | None = None,
) -> RunSpans:
    """The spans of a recorded run and of its sub-agent runs, under `context`."""
    entries = list(Trace.load(store, run_id))
    if not entries or not isinstance(entries[0].fact, f.RunStarted):
        raise ValueError(f"Run {run_id} does not begin with RunStarted; it cannot be exported.")
    spans = RunSpans(
        tracer,
        run_id,
        entries[0].fact,
        capture_content=capture_content,
        store=store,
        context=context,
    )
    memories: Iterator[AgentMemory | None] = itertools.repeat(None)
    if capture_content:  # the memory after each fact: the messages each call was sent
        memories = (memory for _, memory, _ in scan(e.fact for e in entries))
    for entry, memory in zip(entries, memories, strict=False):
        spans.add(entry.fact, entry.timestamp, entry.seq, memory)
    spans.close(entries[-1].timestamp, status=store.run(run_id).status)
    return spans


def export_spans(
    store: EventStore,
    run_id: str,
    *,
    tracer_provider: TracerProvider | None = None,
    capture_content: bool = False,
) -> RunSpans:
    """Make the spans of a recorded run (an id or a unique prefix), at the times its facts
    were recorded, with its sub-agent runs nested in the same trace; a run that has not ended
    gets spans up to its last fact."""
    return _spans_of(
        store,
        resolve_run(store, run_id),
        _tracer(tracer_provider),
        capture_content=capture_content,
    )
