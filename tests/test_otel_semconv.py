"""Spans checked by a third party: every span of the demo, a sub-agent run, a failed tool, a
failed LLM call, runs on the scriptable mock of agentsm.testing and on callers of one's own,
and tool-calling and streamed runs of each provider caller on recorded traffic passes
pytest-genai-semconv's checks of the GenAI semantic conventions, with content captured and
without; and what the log records reaches the spans."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pytest_genai_semconv import (
    assert_chat_span,
    assert_execute_tool_span,
    assert_genai_span_compliant,
    assert_invoke_agent_span,
    spec,
)

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentEngine,
    AgentFailed,
    LlmResponse,
    MockLlmCaller,
    TokenUsage,
    tool,
)
from agentsm.llm import AzureOpenAiCaller
from agentsm.memory import AgentMemory
from agentsm.testing import ToolBehaviour, run_inputs
from agentsm.tools import ToolRegistry
from replay.demo import demo_agent
from replay.otel import export_spans, traced
from replay.semconv import WELL_KNOWN_PROVIDERS, provider_attributes

from .aws import aws_env  # noqa: F401 (a fixture, used by name)
from .loopback import LoopbackProvider
from .subagent_agent import ChildLlm, ParentLlm, researcher
from .test_anthropic import caller as anthropic_caller
from .test_anthropic import weather_agent
from .test_azure import make as azure_caller
from .test_bedrock import TOOL_TURNS as BEDROCK_TURNS
from .test_bedrock import tool_agent as bedrock_agent
from .test_gemini import ENV as GOOGLE_ENV
from .test_gemini import capital_agent, country_agent
from .test_openai import caller as openai_caller
from .test_openai import crumpet_agent
from .test_openai_responses import agent as responses_agent

Spans = tuple[ReadableSpan, ...]

CONTENT = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "agentsm.final_answer",
)


@pytest.fixture
def collected() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def exported(engine: AgentEngine, *, content: bool = False) -> Spans:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    export_spans(engine.store, engine.run_id, tracer_provider=provider, capture_content=content)
    provider.shutdown()
    return exporter.get_finished_spans()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def of(spans: Spans, operation: str) -> list[ReadableSpan]:
    return [s for s in spans if attrs(s).get("gen_ai.operation.name") == operation]


def checked(spans: Spans, *, content: bool) -> Spans:
    """Every span passes the checker, generic and by operation; all in one trace; recorded
    text only with content captured, and then messages in the conventions' shape."""
    assert spans
    for span in spans:
        assert_genai_span_compliant(span)
        operation = attrs(span)["gen_ai.operation.name"]
        by_operation: dict[str, Callable[[ReadableSpan], None]] = {
            "chat": assert_chat_span,
            "execute_tool": assert_execute_tool_span,
            "invoke_agent": assert_invoke_agent_span,
        }
        by_operation[operation](span)
        assert attrs(span).get("gen_ai.provider.name")
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    for span in spans:
        present = [k for k in CONTENT if k in attrs(span)]
        if not content:
            assert present == [], span.name
    if content:
        for chat in of(spans, "chat"):
            messages(attrs(chat)["gen_ai.input.messages"], inbound=True)
            if chat.status.status_code != StatusCode.ERROR:
                messages(attrs(chat)["gen_ai.output.messages"], inbound=False)
    return spans


def messages(text: str, *, inbound: bool) -> list[dict[str, Any]]:
    """Messages in the conventions' JSON shape: roles and typed parts."""
    shaped = json.loads(text)
    assert isinstance(shaped, list) and shaped
    for message in shaped:
        assert message["role"] in (("user", "assistant", "tool") if inbound else ("assistant",))
        assert isinstance(message["parts"], list)
        for part in message["parts"]:
            assert part["type"] in ("text", "reasoning", "tool_call", "tool_call_response")
            if part["type"] in ("text", "reasoning"):
                assert isinstance(part["content"], str)
            elif part["type"] == "tool_call":
                assert part["name"] and isinstance(part["arguments"], dict)
            else:
                assert "id" in part and "response" in part
        if not inbound:
            assert message["finish_reason"] in ("stop", "length", "content_filter", "tool_call")
    if inbound:
        assert shaped[0]["role"] == "user"
    return shaped


def both(engine: AgentEngine) -> tuple[Spans, Spans]:
    """The run's spans exported without content and with it, each checked."""
    return checked(exported(engine), content=False), checked(
        exported(engine, content=True), content=True
    )


# -- the demo, a failed tool, a failed LLM call, a sub-agent run ------------------------------


def test_the_demo(collected: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = collected
    engine = demo_agent().build()
    with traced(engine, tracer_provider=provider):
        engine.run()
    live = checked(exporter.get_finished_spans(), content=False)
    plain, full = both(engine)
    assert [s.name for s in live] == [s.name for s in plain] == [s.name for s in full]
    run = plain[-1]
    assert run.name == "invoke_agent research assistant"
    assert attrs(run)["gen_ai.agent.name"] == "research assistant"
    assert {attrs(s)["gen_ai.provider.name"] for s in plain} == {"openai"}
    searches = [s for s in of(plain, "execute_tool") if s.name == "execute_tool search"]
    assert attrs(searches[0])["gen_ai.tool.description"] == "Search a small offline encyclopedia."
    first = json.loads(attrs(of(full, "chat")[1])["gen_ai.input.messages"])
    assert [m["role"] for m in first] == ["user", "assistant", "tool"]
    assert first[1]["parts"][0] == {
        "type": "tool_call",
        "id": first[2]["parts"][0]["id"],
        "name": "search",
        "arguments": {"query": "capital of France"},
    }
    assert first[2]["parts"][0]["response"] == "SUCCESS: Paris is the capital of France."
    system = json.loads(attrs(of(full, "chat")[0])["gen_ai.system_instructions"])
    assert system == [{"type": "text", "content": engine.definition.system_prompt}]


@tool
def broken(query: str) -> str:
    """Always fails."""
    raise RuntimeError("the service is down")


def test_a_failed_tool_and_a_failed_llm_call() -> None:
    script: list[LlmResponse | BaseException] = [
        LlmResponse.tool_call("broken", {"query": "x"}, id="c1"),
        RuntimeError("the model is overloaded"),
    ]
    llm = MockLlmCaller(script, provider="anthropic")
    engine = AgentBuilder("Look x up").name("looker").llm(llm).tool(broken).build()
    with pytest.raises(AgentFailed):
        engine.run()
    plain, _ = both(engine)
    failed_tool = of(plain, "execute_tool")[0]
    assert failed_tool.status.status_code == StatusCode.ERROR
    assert attrs(failed_tool)["error.type"] and attrs(failed_tool)["gen_ai.tool.description"]
    failed_chat = of(plain, "chat")[-1]
    assert failed_chat.status.status_code == StatusCode.ERROR
    assert attrs(failed_chat)["error.type"] == "RuntimeError"
    assert attrs(failed_chat)["gen_ai.provider.name"] == "anthropic"


def test_a_failed_provider_call() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/13_error_401_invalid_api_key")
        engine = AgentBuilder("hi").llm(openai_caller(server)).build()
        with pytest.raises(AgentFailed):
            engine.run()
    plain, _ = both(engine)
    [chat] = of(plain, "chat")
    assert attrs(chat)["error.type"] == "AuthenticationFailed"
    assert attrs(chat)["gen_ai.provider.name"] == "openai"


class Declared(ParentLlm):
    """A caller of one's own that says which provider it calls."""

    settings = {"provider": "mistral_ai", "temperature": 0.5}


def test_a_sub_agent_run_nests_under_the_call_that_started_it(
    collected: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = collected

    def child_of(task: str) -> AgentBuilder:
        return researcher(task, llm=_openai_child()).name("scholar")

    engine = (
        AgentBuilder("Who wrote Dune?")
        .name("lead")
        .llm(Declared())
        .subagent("researcher", "Research one question.", child_of)
        .build()
    )
    with traced(engine, tracer_provider=provider):
        engine.run()
    live = checked(exporter.get_finished_spans(), content=False)
    plain, _ = both(engine)
    for spans in (live, plain):
        names = {s.context.span_id: s for s in spans if s.context is not None}
        parent_of = {s.name: names[s.parent.span_id].name for s in spans if s.parent}
        assert parent_of["invoke_agent scholar"] == "execute_tool researcher"
        assert parent_of["execute_tool researcher"] == "invoke_agent lead"
        assert parent_of["execute_tool note"] == "invoke_agent scholar"
        providers = {s.name: attrs(s)["gen_ai.provider.name"] for s in of(spans, "chat")}
        assert set(providers.values()) == {"mistral_ai", "openai"}
    lead = [s for s in plain if s.name == "invoke_agent lead"][0]
    sub = [s for s in plain if s.name == "invoke_agent scholar"][0]
    assert attrs(sub)["agentsm.parent_run.id"] == engine.run_id
    assert attrs(sub)["gen_ai.conversation.id"] != attrs(lead)["gen_ai.conversation.id"]
    assert attrs(of(plain, "chat")[0])["gen_ai.request.temperature"] == 0.5


def _openai_child() -> Any:
    """The child's LLM: the scripted child, standing in for OpenAI."""
    child = ChildLlm()
    return MockLlmCaller([child.call, child.call], provider="openai")


# -- the scriptable mock and callers of one's own -----------------------------------------------


def test_a_run_on_the_scriptable_mock_of_agentsm_testing() -> None:
    script = [
        LlmResponse.tool_call("lookup", {"key": "k"}, id="c1"),
        LlmResponse.final_answer("The value of k, as looked up."),
    ]
    found = run_inputs(script, AgentConfig(), {"lookup": ToolBehaviour("success")}, [], None)
    plain, full = both(found.engine)
    assert [s.name for s in plain] == ["chat", "execute_tool lookup", "chat", "invoke_agent"]
    for span in plain:  # nothing named a provider: the default, and said to be one
        assert attrs(span)["gen_ai.provider.name"] == "openai"
        assert attrs(span)["agentsm.llm.provider_source"] == "default"
        assert "agentsm.llm.provider" not in attrs(span)


class OwnCaller:
    """A caller of one's own: a class with `call`, its provider in its settings or not."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.served = 0

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        self.served += 1
        if self.served == 1:
            return LlmResponse.tool_call("note", {"text": memory.task}, id="n1")
        return LlmResponse.final_answer("Noted, and answered at length.")


@tool
def note(text: str) -> str:
    """Note a text down."""
    return f"noted: {text}"


OWN = {  # settings, model -> gen_ai.provider.name, where it comes from, the caller's own name
    "declared": ({"provider": "mistral_ai"}, "", ("mistral_ai", "declared", None)),
    "declared as people write it": ({"provider": "Mistral"}, "", ("mistral_ai", "declared", None)),
    "from the model": ({}, "claude-sonnet-4-0", ("anthropic", "model", None)),
    "a gateway's model": (
        {"provider": "acme-gateway"},
        "mistralai/Mixtral-8x7B-Instruct",
        ("mistral_ai", "model", "acme-gateway"),
    ),
    "nothing known": ({"provider": "acme-gateway"}, "", ("openai", "default", "acme-gateway")),
}


@pytest.mark.parametrize("name", OWN)
def test_a_run_on_a_caller_of_ones_own(
    name: str, collected: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    settings, model, (expected, source, own) = OWN[name]
    builder = AgentBuilder("Note this down").name("notes").llm(OwnCaller(settings)).tool(note)
    engine = (builder.model(model) if model else builder).build()
    provider, exporter = collected
    with traced(engine, tracer_provider=provider):
        engine.run()
    live = checked(exporter.get_finished_spans(), content=False)
    plain, _ = both(engine)
    for spans in (live, plain):
        assert len(of(spans, "chat")) == 2
        for span in spans:
            assert attrs(span)["gen_ai.provider.name"] == expected
            assert attrs(span)["agentsm.llm.provider_source"] == source
            assert attrs(span).get("agentsm.llm.provider") == own


def test_every_provider_a_caller_can_name_is_one_the_checker_knows() -> None:
    known = frozenset(spec.PROVIDER_NAMES)
    assert WELL_KNOWN_PROVIDERS == known
    for provider in ("openai", "Azure OpenAI", "gemini", "bedrock", "xAI", "watsonx", "", "x"):
        for model in ("", "gpt-4o", "o3-mini", "grok-4", "deepseek-chat", "sonar-pro", "llama"):
            reported = provider_attributes({"provider": provider}, model)
            assert reported["gen_ai.provider.name"] in known, (provider, model)


# -- each provider caller, on recorded traffic -------------------------------------------------

Run = Callable[[LoopbackProvider], AgentEngine]


def _stream(engine: AgentEngine) -> AgentEngine:
    import asyncio

    async def drain() -> None:
        async for _ in engine.stream():
            pass

    asyncio.run(drain())
    return engine


OPENAI_TOOL_TURNS = (
    "03_tool_call_single_nonstream_turn1",
    "04_tool_call_single_nonstream_turn2_second_call",
    "05_tool_call_single_nonstream_turn3_final_text",
)


def _openai_tools(server: LoopbackProvider) -> AgentEngine:
    for name in OPENAI_TOOL_TURNS:
        server.serve_fixture(f"openai/{name}")
    caller = openai_caller(server, seed=7, temperature=0.25, max_tokens=300)
    engine = crumpet_agent(caller).build()
    engine.run()
    return engine


def _multiply(builder: AgentBuilder) -> AgentBuilder:
    schema = {
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "type": "object",
    }
    return builder.tool("multiply", "Multiply two numbers.", schema, lambda a: a["a"] * a["b"])


def _openai_stream(server: LoopbackProvider) -> AgentEngine:
    server.serve_fixture("openai/09_tool_call_stream_turn1")
    server.serve_fixture("openai/10_tool_call_stream_turn2_final_text")
    builder = AgentBuilder("What is 1231 * 2331?").llm(openai_caller(server, stream=True))
    return _stream(_multiply(builder.config(AgentConfig(min_answer_length=1))).build())


def _anthropic(stream: bool) -> Run:
    def run(server: LoopbackProvider) -> AgentEngine:
        turns = (
            ("07_tool_use_stream_turn1", "08_tool_use_stream_turn2_final_text")
            if stream
            else (
                "03_tool_use_single_nonstream_turn1",
                "04_tool_use_single_nonstream_turn2_final_text",
            )
        )
        for turn in turns:
            server.serve_fixture(f"anthropic/{turn}")
        engine = weather_agent(anthropic_caller(server, stream=stream, temperature=0.0)).build()
        return _stream(engine) if stream else (engine.run(), engine)[1]

    return run


def _anthropic_cache(server: LoopbackProvider) -> AgentEngine:
    server.serve_fixture("anthropic_thinking/10_prompt_cache_turn1_cache_read")
    caller = anthropic_caller(server, cache="auto")
    engine = AgentBuilder("Explain Python.").llm(caller).model("claude-sonnet-4-0").build()
    engine.run()
    return engine


def _responses(stream: bool) -> Run:
    def run(server: LoopbackProvider) -> AgentEngine:
        first, second = (
            ("08_stream_function_call_turn1", "09_stream_text_turn2")
            if stream
            else ("02_function_call_turn1", "03_function_call_turn2_final_text")
        )
        server.serve_fixture(f"openai_responses/{first}")
        server.serve_fixture(f"openai_responses/{second}")
        engine = responses_agent(server, first, "Potato City", stream=stream).build()
        return _stream(engine) if stream else (engine.run(), engine)[1]

    return run


def _azure(stream: bool) -> Run:
    def run(server: LoopbackProvider) -> AgentEngine:
        if stream:
            recorded = server.serve_fixture("azure_openai/04_chat_text_stream_include_usage")
            task = recorded["request"]["json"]["messages"][0]["content"]
            caller = azure_caller(AzureOpenAiCaller, server, stream=True, seed=3)
            builder = AgentBuilder(task).llm(caller).config(AgentConfig(min_answer_length=1))
            return _stream(builder.model(recorded["request"]["json"]["model"]).build())
        for name in OPENAI_TOOL_TURNS:
            server.serve_fixture(f"openai/{name}")  # Chat Completions, as Azure serves it
        caller = azure_caller(AzureOpenAiCaller, server, azure_deployment="gpt-4o-mini")
        engine = crumpet_agent(caller).build()
        engine.run()
        return engine

    return run


def _gemini(stream: bool) -> Run:
    def run(server: LoopbackProvider) -> AgentEngine:
        if stream:
            server.serve_fixture("google/08_stream_function_call_thought_signature_turn1")
            server.serve_fixture("google/09_stream_text_turn2")
            return _stream(capital_agent(server, ":memory:").build())  # type: ignore[arg-type]
        server.serve_fixture("google/02_function_call_thought_signature_turn1")
        server.serve_fixture("google/03_function_response_turn2_final_text")
        engine = country_agent(server, ":memory:", temperature=0.5).build()  # type: ignore[arg-type]
        engine.run()
        return engine

    return run


def _bedrock(shape: str) -> Run:
    def run(server: LoopbackProvider) -> AgentEngine:
        for name in BEDROCK_TURNS[shape]["turns"]:
            server.serve_fixture(f"bedrock/{name}")
        return _stream(bedrock_agent(server, shape, ":memory:").build())  # type: ignore[arg-type]

    return run


RUNS: dict[str, tuple[Run, str]] = {
    "openai tools": (_openai_tools, "openai"),
    "openai stream": (_openai_stream, "openai"),
    "anthropic tools": (_anthropic(False), "anthropic"),
    "anthropic stream": (_anthropic(True), "anthropic"),
    "anthropic cache": (_anthropic_cache, "anthropic"),
    "responses tools": (_responses(False), "openai"),
    "responses stream": (_responses(True), "openai"),
    "azure tools": (_azure(False), "azure.ai.openai"),
    "azure stream": (_azure(True), "azure.ai.openai"),
    "gemini tools": (_gemini(False), "gcp.gemini"),
    "gemini stream": (_gemini(True), "gcp.gemini"),
    "bedrock tools": (_bedrock("plain, failed tool"), "aws.bedrock"),
    "bedrock stream": (_bedrock("streamed"), "aws.bedrock"),
}


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("name", sorted(RUNS))
def test_provider_runs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in GOOGLE_ENV:
        monkeypatch.delenv(variable, raising=False)
    run, expected = RUNS[name]
    with LoopbackProvider() as server:
        engine = run(server)
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    assert engine.memory.final_answer
    plain, _ = both(engine)
    chats = of(plain, "chat")
    assert chats
    for chat in chats:
        a = attrs(chat)
        assert a["gen_ai.provider.name"] == expected
        if expected != "aws.bedrock":  # Converse names neither the response nor the model
            assert a["gen_ai.response.id"] and a["gen_ai.response.model"]
        assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
        assert a["gen_ai.usage.output_tokens"] > 0 or "stream" in name
    settings = engine.definition.llm
    for key, attribute in (
        ("seed", "gen_ai.request.seed"),
        ("temperature", "gen_ai.request.temperature"),
        ("max_tokens", "gen_ai.request.max_tokens"),
    ):
        assert (attribute in attrs(chats[0])) == (key in settings), key
        if key in settings:
            assert attrs(chats[0])[attribute] == settings[key]
    described = {t.name: t.description for t in engine.definition.tools}
    for span in of(plain, "execute_tool"):
        said = described[attrs(span)["gen_ai.tool.name"]]
        assert attrs(span).get("gen_ai.tool.description") == (said or None)
    if name == "anthropic cache":
        a = attrs(chats[0])
        assert a["gen_ai.usage.cache_read.input_tokens"] == 1111
        assert a["gen_ai.usage.input_tokens"] == 3 + 1111  # the cached tokens included


def test_old_responses_without_ids_are_written_as_before() -> None:
    plain = LlmResponse.final_answer("ok", usage=TokenUsage(input_tokens=1))
    assert "response_id" not in plain.model_dump() and "server" not in plain.model_dump()
    named = plain.model_copy(update={"response_id": "r1", "server": "https://api.openai.com"})
    assert named.model_dump()["response_id"] == "r1"
