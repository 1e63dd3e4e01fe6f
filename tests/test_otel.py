"""Runs as OpenTelemetry traces (GenAI semantic conventions), live and after the fact, and once
end to end through the OTLP/HTTP exporter to a receiver on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentsm import (
    AgentBuilder,
    AgentEngine,
    AgentFailed,
    HandlerCrashed,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    tool,
)
from agentsm.types import TokenUsage
from replay import decide, resume_run
from replay.cli.otel import otel_command
from replay.cli.worker import worker_command
from replay.otel import export_spans, traced
from replay.worker import Worker

from .scenarios import LONG
from .stores import connect
from .worker_agent import make_agent

SECRET = "sk-live-4242"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()  # type: ignore[no-untyped-call]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


@tool
def broken(query: str) -> str:
    """Always fails."""
    raise RuntimeError("the service is down")


def agent(store: Any) -> AgentEngine:
    usage = TokenUsage(input_tokens=120, output_tokens=30)
    llm = MockLlmCaller(
        [
            LlmResponse.tool_call("lookup", {"query": f"key {SECRET}"}, usage=usage, id="c1"),
            LlmResponse.tool_call("broken", {"query": "x"}, usage=usage, id="c2"),
            LlmResponse.final_answer(LONG).model_copy(
                update={"usage": TokenUsage(input_tokens=200, output_tokens=12)}
            ),
        ]
    )
    return (
        AgentBuilder(f"Find the owner of {SECRET}")
        .name("finder")
        .system_prompt("You look things up.")
        .model("gpt-test")
        .llm(llm)
        .tool(lookup)
        .tool(broken)
        .redact(r"sk-live-\d+", name="api keys")
        .store(store)
        .build()
    )


def shape(finished: tuple[ReadableSpan, ...]) -> list[tuple[str, str | None, dict[str, Any]]]:
    """Each span's name, its parent's name and its attributes, in the order they ended."""
    names = {s.context.span_id: s.name for s in finished if s.context is not None}
    return [
        (s.name, names.get(s.parent.span_id) if s.parent else None, dict(s.attributes or {}))
        for s in finished
    ]


def test_a_live_run_gives_genai_spans(
    log_url: str, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    engine = agent(connect(log_url))
    with traced(engine, tracer_provider=provider):
        engine.run()
    finished = exporter.get_finished_spans()
    got = shape(finished)
    assert [(name, parent) for name, parent, _ in got] == [
        ("chat gpt-test", "invoke_agent finder"),
        ("execute_tool lookup", "invoke_agent finder"),
        ("chat gpt-test", "invoke_agent finder"),
        ("execute_tool broken", "invoke_agent finder"),
        ("chat gpt-test", "invoke_agent finder"),
        ("invoke_agent finder", None),
    ]
    chat, tool_span, _, failed_tool, last_chat, run = (a for _, _, a in got)
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "gpt-test"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (120, 30)
    assert chat["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert last_chat["gen_ai.response.finish_reasons"] == ("stop",)
    assert last_chat["gen_ai.usage.input_tokens"] == 200
    assert tool_span["gen_ai.operation.name"] == "execute_tool"
    assert (tool_span["gen_ai.tool.name"], tool_span["gen_ai.tool.call.id"]) == ("lookup", "c1")
    assert run["gen_ai.operation.name"] == "invoke_agent"
    assert run["gen_ai.conversation.id"] == engine.run_id
    assert run["agentsm.run.status"] == "done"
    statuses = [s.status.status_code for s in finished]
    assert statuses[3] == StatusCode.ERROR and failed_tool["error.type"]
    assert statuses.count(StatusCode.ERROR) == 1  # the run itself ended well
    everything = json.dumps([a for _, _, a in got])
    assert "content" not in everything and "found" not in everything  # no content by default
    assert "gen_ai.tool.call.arguments" not in failed_tool


def test_a_recorded_run_gives_the_same_spans_at_the_times_it_was_recorded(
    log_url: str, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    store = connect(log_url)
    engine = agent(store)
    with traced(engine, tracer_provider=provider):
        engine.run()
    live = shape(exporter.get_finished_spans())
    exporter.clear()
    export_spans(store, engine.run_id[:6], tracer_provider=provider)
    later = exporter.get_finished_spans()
    assert shape(later) == live
    times = [e.timestamp for e in engine.trace()]
    run_span = later[-1]
    assert run_span.start_time == int(times[0] * 1e9) and run_span.end_time == int(times[-1] * 1e9)


def test_content_only_when_asked_and_redacted_values_never(
    log_url: str, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    store = connect(log_url)
    engine = agent(store)
    with traced(engine, tracer_provider=provider, capture_content=True):
        engine.run()
    export_spans(store, engine.run_id, tracer_provider=provider, capture_content=True)
    got = shape(exporter.get_finished_spans())
    everything = json.dumps([a for _, _, a in got])
    assert SECRET not in everything and "[REDACTED]" in everything
    tool_span = got[1][2]
    assert json.loads(tool_span["gen_ai.tool.call.arguments"]) == {"query": "key [REDACTED]"}
    assert tool_span["gen_ai.tool.call.result"] == "SUCCESS: found key [REDACTED]"
    [message] = json.loads(got[4][2]["gen_ai.output.messages"])
    assert message["parts"] == [{"type": "text", "content": LONG}]
    run = got[5][2]
    assert json.loads(run["gen_ai.system_instructions"])[0]["content"] == "You look things up."


def test_a_failed_run_and_a_failed_llm_call_are_errors(
    log_url: str, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    engine = AgentBuilder("Fail").llm(MockLlmCaller([])).store(connect(log_url)).build()
    with traced(engine, tracer_provider=provider), pytest.raises(AgentFailed):
        engine.run()
    chat, run = exporter.get_finished_spans()
    assert chat.status.status_code == StatusCode.ERROR and "LlmScriptExhausted" in str(
        chat.status.description
    )
    assert (chat.attributes or {})["error.type"] == "LlmScriptExhausted"
    assert run.status.status_code == StatusCode.ERROR
    assert (chat.status.description, run.status.description) == ("LlmScriptExhausted", "RunFailed")
    exporter.clear()  # the recorded text (the error message) only with content captured
    export_spans(engine.store, engine.run_id, tracer_provider=provider, capture_content=True)
    chat, run = exporter.get_finished_spans()
    assert "no more programmed responses" in str(chat.status.description)
    assert "no more programmed responses" in str(run.status.description)


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP traces endpoint that decodes what it gets."""

    received: list[ExportTraceServiceRequest] = []

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).received.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_otel_command_sends_a_recorded_run_over_otlp_http(log_url: str) -> None:
    store = connect(log_url)
    engine = agent(store)
    engine.run()
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        result = CliRunner().invoke(
            otel_command, [engine.run_id, "--db", log_url, "--endpoint", endpoint]
        )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=60)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        f"sent 6 spans of 1 run(s) ({engine.run_id}) to {endpoint}/v1/traces"
    )
    decoded = [
        (span.name, {a.key: a.value for a in span.attributes})
        for request in _Receiver.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert [name for name, _ in decoded] == [
        "chat gpt-test",
        "execute_tool lookup",
        "chat gpt-test",
        "execute_tool broken",
        "chat gpt-test",
        "invoke_agent finder",
    ]
    chat = decoded[0][1]
    assert chat["gen_ai.usage.input_tokens"].int_value == 120
    assert chat["gen_ai.request.model"].string_value == "gpt-test"
    assert decoded[1][1]["gen_ai.tool.name"].string_value == "lookup"
    [resource] = {
        a.value.string_value
        for r in _Receiver.received
        for rs in r.resource_spans
        for a in rs.resource.attributes
        if a.key == "service.name"
    }
    assert resource == "agentsm"


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    port = int(server.server_address[1])
    server.server_close()
    return port


def sdk_noise(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry")]


def test_otel_command_says_in_one_line_when_no_collector_listens(
    log_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = connect(log_url)
    engine = agent(store)
    engine.run()
    endpoint = f"http://127.0.0.1:{closed_port()}"
    runner = CliRunner()
    caplog.set_level(logging.DEBUG)
    result = runner.invoke(otel_command, [engine.run_id, "--db", log_url, "--endpoint", endpoint])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"Error: No OTLP collector accepts connections at {endpoint}/v1/traces (Connection "
        "refused); start one there or give its address with --endpoint."
    ]
    assert sdk_noise(caplog) == []
    bad = runner.invoke(otel_command, [engine.run_id, "--db", log_url, "--endpoint", "localhost"])
    assert bad.exit_code == 2 and "is not an http(s) URL" in bad.output


def test_worker_command_says_once_when_its_collector_is_unreachable(
    log_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTSM_TEST_LEDGER", str(tmp_path / "ledger.txt"))
    (tmp_path / "ledger.txt").touch()
    spec = f"{Path(__file__).parent / 'worker_agent.py'}:make_agent"
    store = connect(log_url)
    run_id = make_agent("one entry").store(store).submit()
    endpoint = f"http://127.0.0.1:{closed_port()}"
    caplog.set_level(logging.DEBUG)
    args = ["--builder", spec, "--db", log_url, "--once", "--otel-endpoint", endpoint]
    result = CliRunner().invoke(worker_command, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{run_id} (queued) -> done")
    assert result.stderr.splitlines() == [
        f"agentsm worker: no OTLP collector accepts connections at {endpoint}/v1/traces "
        "(Connection refused); spans are dropped until it does."
    ]
    assert sdk_noise(caplog) == []
    assert store.run(run_id).status == "done"


def test_a_worker_traces_the_runs_it_drives_live(
    log_url: str, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    store = connect(log_url)
    submitted = agent(store)
    run_id = submitted.submit()

    def builder(task: str) -> AgentBuilder:
        return AgentBuilder(task).llm(submitted.llm).tool(lookup).tool(broken)

    worker = Worker(store, builder, around=lambda e: traced(e, tracer_provider=provider))
    [result] = worker.drain()
    assert result.outcome == "done"
    got = shape(exporter.get_finished_spans())
    assert [name for name, _, _ in got][-2:] == ["chat gpt-test", "invoke_agent finder"]
    assert got[-1][2]["gen_ai.conversation.id"] == run_id
    assert len(got) == 6


def test_worker_command_sends_spans_live_over_otlp_http(
    log_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSM_TEST_LEDGER", str(tmp_path / "ledger.txt"))
    (tmp_path / "ledger.txt").touch()
    spec = f"{Path(__file__).parent / 'worker_agent.py'}:make_agent"
    store = connect(log_url)
    run_id = make_agent("one entry").store(store).submit()
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        args = ["--builder", spec, "--db", log_url, "--once", "--otel-endpoint", endpoint]
        result = CliRunner().invoke(worker_command, args)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=60)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"{run_id} (queued) -> done")
    names = [
        span.name
        for request in _Receiver.received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    assert names == [
        "chat",
        "execute_tool write",
        "chat",
        "execute_tool count",
        "chat",
        "invoke_agent",
    ]


def test_a_tool_cut_short_by_a_crash_is_a_span_with_an_unknown_outcome(
    log_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    monkeypatch.setenv("AGENTSM_TEST_LEDGER", str(tmp_path / "ledger.txt"))
    (tmp_path / "ledger.txt").touch()
    store = connect(log_url)

    async def crash(call: Any) -> Any:
        raise RuntimeError("the process died here")  # leaves the call in flight, as a kill does

    engine = make_agent("entry").tool_runner(crash).store(store).build()
    with traced(engine, tracer_provider=provider), pytest.raises(HandlerCrashed):
        engine.run()
    *_, aborted = exporter.get_finished_spans()  # live: the run stopped with an error
    assert aborted.name == "invoke_agent" and aborted.status.status_code == StatusCode.ERROR
    assert (aborted.attributes or {})["error.type"] == "HandlerCrashed"
    exporter.clear()
    with pytest.raises(HumanInputRequired):  # not idempotent: did it take effect?
        resume_run(store, engine.run_id, make_agent)
    decide(store, engine.run_id, "approved")
    resume_run(store, engine.run_id, make_agent)
    export_spans(store, engine.run_id, tracer_provider=provider)
    tools = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert [(s.name, (s.attributes or {}).get("agentsm.tool.outcome")) for s in tools] == [
        ("execute_tool write", "unknown"),
        ("execute_tool write", None),
        ("execute_tool count", None),
    ]
    assert tools[0].end_time is not None and tools[1].start_time is not None
    assert tools[0].end_time <= tools[1].start_time
    run = exporter.get_finished_spans()[-1]  # resumed and done: the abort is an event of it
    assert run.status.status_code != StatusCode.ERROR
    assert [e.name for e in run.events] == ["agentsm.run.aborted"]
