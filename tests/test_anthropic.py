"""AnthropicCaller through the official anthropic SDK against recorded traffic on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    AgentMemory,
    BuildError,
    LlmResponse,
    TextDelta,
    TokenBudget,
    ToolRegistry,
)
from agentsm.llm import AnthropicCaller, RetryPolicy
from agentsm.llm.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    Overloaded,
    RateLimited,
)
from agentsm.types import HistoryEntry, ToolCall

from .loopback import LoopbackProvider

KEY = "sk-ant-test-0123456789abcdef"


def caller(server: LoopbackProvider, **kwargs: Any) -> AnthropicCaller:
    sleeps: list[float] = []

    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)

    policy = RetryPolicy(max_retries=kwargs.pop("max_retries", 2), sleep=no_wait)
    c = AnthropicCaller(base_url=server.url, api_key=KEY, retry=policy, **kwargs)
    c.sleeps = sleeps  # type: ignore[attr-defined]
    return c


def call(c: AnthropicCaller, memory: AgentMemory, tools: ToolRegistry | None = None) -> LlmResponse:
    return asyncio.run(c.call(memory, tools or ToolRegistry(), "claude-test"))


WEATHER_SCHEMA = {
    "additionalProperties": False,
    "properties": {"location": {"type": "string"}, "units": {"enum": ["c", "f"], "type": "string"}},
    "required": ["location", "units"],
    "type": "object",
}


def weather_agent(c: AnthropicCaller) -> AgentBuilder:
    return (
        AgentBuilder("What is the weather in SF?")
        .llm(c)
        .config(AgentConfig(min_answer_length=1))
        .tool(
            "get_weather",
            "Lookup the weather for a given city in either celsius or fahrenheit",
            WEATHER_SCHEMA,
            lambda a: (
                '{"location": "San Francisco, CA", "temperature": "68°F", "condition": "Sunny"}'
            ),
        )
    )


def test_plain_answer_usage_and_headers() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/01_text_nonstream")
        memory = AgentMemory(
            task="What does Nietzsche mean by 'God is dead'?", system_prompt="Be precise."
        )
        response = call(caller(server, max_tokens=15), memory)
    assert response.is_final and response.content and response.stop_reason == "max_tokens"
    assert response.usage is not None and response.usage.input_tokens > 0
    sent = server.requests[0]
    assert sent["path"] == "/v1/messages"
    headers = sent["headers"]  # newer SDKs send the key as a bearer token
    assert KEY in (
        headers.get("x-api-key"),
        headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert "anthropic-version" in headers
    assert sent["json"]["system"] == "Be precise." and sent["json"]["max_tokens"] == 15
    assert sent["json"]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": memory.task}]}
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_turns_send_native_blocks(stream: bool) -> None:
    turns = (
        ("07_tool_use_stream_turn1", "08_tool_use_stream_turn2_final_text")
        if stream
        else ("03_tool_use_single_nonstream_turn1", "04_tool_use_single_nonstream_turn2_final_text")
    )
    with LoopbackProvider() as server:
        first = server.serve_fixture(f"anthropic/{turns[0]}")
        recorded = server.serve_fixture(f"anthropic/{turns[1]}")
        engine = weather_agent(caller(server, stream=stream)).build()
        answer = engine.run()
    assert "68" in answer
    call_id = recorded["request"]["json"]["messages"][1]["content"][0]["id"]
    assert engine.memory.history[0].tool.id == call_id
    assert engine.memory.history[0].tool.args == {"location": "San Francisco, CA", "units": "f"}
    sent = server.requests[1]["json"]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    use = sent["messages"][1]["content"][-1]
    assert (use["type"], use["id"], use["name"], use["input"]) == (
        "tool_use",
        call_id,
        "get_weather",
        {"location": "San Francisco, CA", "units": "f"},
    )
    result = sent["messages"][2]["content"][0]
    assert (result["type"], result["tool_use_id"]) == ("tool_result", call_id)
    assert "is_error" not in result and result["content"].startswith("SUCCESS: ")
    assert sent["tools"][0]["name"] == first["request"]["json"]["tools"][0]["name"]
    assert sent["tools"][0]["input_schema"] == WEATHER_SCHEMA
    assert server.requests[0]["json"].get("stream", False) is stream


def family_agent(c: AnthropicCaller) -> AgentBuilder:
    facts = {
        "Alice": "alice is bob's wife",
        "Bob": "bob is alice's husband",
        "Charlie": "charlie is alice's son",
        "Daisy": "daisy is bob's daughter and charlie's younger sister",
    }
    return (
        AgentBuilder("Alice, Bob, Charlie and Daisy are a family. Who is the youngest?")
        .system_prompt("Use the `retrieve_entity_info` tool.")
        .llm(c)
        .tool(
            "retrieve_entity_info",
            "Get the knowledge about the given entity.",
            {
                "additionalProperties": False,
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
                "type": "object",
            },
            lambda a: facts[a["name"]],
        )
    )


def test_parallel_tool_use_keeps_text_and_answers_every_call_in_one_message() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/05_parallel_tool_use_nonstream_turn1")
        recorded = server.serve_fixture("anthropic/06_parallel_tool_use_nonstream_turn2_final_text")
        engine = family_agent(caller(server)).build()
        answer = engine.run()
    assert "Daisy" in answer
    planned = [e.fact for e in engine.trace() if e.event == "ToolCallsPlanned"][0]
    assert planned.parallel and len(planned.calls) == 4
    assert planned.text is not None and planned.text.startswith("I'll help you find out")
    sent = server.requests[1]["json"]["messages"]
    expected = recorded["request"]["json"]["messages"]
    assert [m["role"] for m in sent] == [m["role"] for m in expected]
    assert sent[1]["content"][0] == {"type": "text", "text": planned.text}
    assert [b["id"] for b in sent[1]["content"][1:]] == [
        b["id"] for b in expected[1]["content"][1:]
    ]
    assert [b["tool_use_id"] for b in sent[2]["content"]] == [
        b["tool_use_id"] for b in expected[2]["content"]
    ]


def test_parallel_stream_with_parameterless_tools() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/09_parallel_tool_use_stream_turn1")
        server.serve_fixture("anthropic/10_parallel_tool_use_stream_turn2_final_text")
        names = iter(["Charles", "Sammy"])
        engine = (
            AgentBuilder("Two names for a pet pelican")
            .llm(caller(server, stream=True))
            .config(AgentConfig(min_answer_length=1))
            .tool(
                "pelican_name_generator",
                "",
                {"properties": {}, "type": "object"},
                lambda a: next(names),
            )
            .build()
        )

        async def collect() -> list[Any]:
            return [o async for o in engine.stream()]

        outputs = asyncio.run(collect())
    calls = [e.fact for e in engine.trace() if e.event == "ToolCallsPlanned"][0].calls
    assert [c.args for c in calls] == [{}, {}]
    deltas = "".join(o.text for o in outputs if isinstance(o, TextDelta))
    assert deltas and deltas == engine.memory.final_answer
    assert engine.memory.total_usage.input_tokens > 0


def test_summary_and_failed_results_are_sent_readably() -> None:
    summary = HistoryEntry(
        step=5,
        tool=ToolCall(name="[SUMMARY]", id="summary-5"),
        observation="Found the capital.",
        success=True,
    )
    failed = HistoryEntry(
        step=6,
        tool=ToolCall(name="lookup", args={"q": 1}, id="c6"),
        observation="ERROR: ValueError: bad",
        success=False,
    )
    memory = AgentMemory(task="Go on.", history=(summary, failed))
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/01_text_nonstream")
        call(caller(server), memory)
    messages = server.requests[0]["json"]["messages"]
    assert messages[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Go on."},
            {"type": "text", "text": "Summary of the work so far: Found the capital."},
        ],
    }
    assert messages[2]["content"][0]["is_error"] is True


def test_errors_retries_and_overload() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/11_error_401_authentication_error")
        with pytest.raises(AuthenticationFailed, match="ANTHROPIC_API_KEY"):
            call(caller(server), AgentMemory(task="hi"))
        assert len(server.requests) == 1
        server.serve_fixture("anthropic/15_error_400_tool_result_without_tool_use")
        with pytest.raises(BadRequest, match="refused the request \\(400\\)"):
            call(caller(server), AgentMemory(task="hi"))
        server.serve_fixture("anthropic/17_error_404_model_not_found")
        with pytest.raises(BadRequest, match="Check the model name"):
            call(caller(server), AgentMemory(task="hi"))
        too_long = "prompt is too long: 210000 tokens > 200000 maximum"
        server.serve(
            400, {"type": "error", "error": {"type": "invalid_request_error", "message": too_long}}
        )
        with pytest.raises(ContextOverflow, match="^context length exceeded: prompt is too long"):
            call(caller(server), AgentMemory(task="hi"))
        overloaded = {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        }
        server.serve(529, overloaded)
        server.serve(529, overloaded)
        with pytest.raises(Overloaded):
            call(caller(server, max_retries=1), AgentMemory(task="hi"))
        assert len(server.requests) == 6


def test_rate_limited_stream_request_retries_then_streams() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/13_error_429_on_stream_request")
        server.responses[-1].headers = {**(server.responses[-1].headers or {}), "retry-after": "3"}
        server.serve_fixture("anthropic/14_text_stream_after_429_retry")
        c = caller(server, stream=True)
        response = call(c, AgentMemory(task="Extract order IDs"))
    assert response.content and "12345" in response.content
    assert c.sleeps == [3.0]  # type: ignore[attr-defined]
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/12_error_429_rate_limit_error")
        server.serve_fixture("anthropic/12_error_429_rate_limit_error")
        with pytest.raises(RateLimited, match="rate limit"):
            call(caller(server, max_retries=1), AgentMemory(task="x"))


def test_keys_never_reach_the_log_or_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(BuildError, match="ANTHROPIC_API_KEY is not set"):
        AnthropicCaller.from_env()
    engine = AgentBuilder("hi").llm(AnthropicCaller()).build()
    with pytest.raises(AgentFailed, match="ANTHROPIC_API_KEY is not set"):
        engine.run()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    assert AnthropicCaller.from_env().default_model
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/11_error_401_authentication_error")
        engine = AgentBuilder("hi").llm(AnthropicCaller(base_url=server.url, max_retries=0)).build()
        with pytest.raises(AgentFailed, match="rejected the credentials") as info:
            engine.run()
    text = engine.trace().to_json() + repr(engine.llm) + str(info.value) + repr(info.value)
    assert KEY not in text and "api_key=set" in repr(engine.llm)


def test_budget_works_with_real_usage() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/05_parallel_tool_use_nonstream_turn1")
        engine = family_agent(caller(server)).budget(TokenBudget(max_total_tokens=100)).build()
        with pytest.raises(AgentFailed, match="Token budget exhausted"):
            engine.run()
    assert engine.memory.total_usage.total_tokens >= 100
    assert len(server.requests) == 1
