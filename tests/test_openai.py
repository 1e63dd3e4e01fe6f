"""OpenAiCaller through the official openai SDK against recorded traffic on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    AgentMemory,
    LlmResponse,
    TextDelta,
    ToolRegistry,
)
from agentsm.llm import OpenAiCaller, RetryPolicy
from agentsm.llm.errors import (
    AuthenticationFailed,
    BadRequest,
    ContextOverflow,
    RateLimited,
    ServerError,
)

from .loopback import LoopbackProvider

SSE = {"content-type": "text/event-stream; charset=utf-8"}


def caller(server: LoopbackProvider, **kwargs: Any) -> OpenAiCaller:
    sleeps: list[float] = []

    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)

    policy = RetryPolicy(max_retries=kwargs.pop("max_retries", 2), sleep=no_wait)
    c = OpenAiCaller(
        base_url=server.url + "/v1", api_key="sk-test-0123456789abcdef", retry=policy, **kwargs
    )
    c.sleeps = sleeps  # type: ignore[attr-defined]
    return c


def call(
    c: OpenAiCaller,
    task: str,
    tools: ToolRegistry | None = None,
    model: str = "m",
    system: str = "",
) -> LlmResponse:
    memory = AgentMemory(task=task, system_prompt=system)
    return asyncio.run(c.call(memory, tools or ToolRegistry(), model))


def test_plain_answer_and_request() -> None:
    with LoopbackProvider() as server:
        recorded = server.serve_fixture("openai/01_text_nonstream")
        response = call(caller(server), "Say this is a test", model="gpt-4o-mini")
    assert response.is_final and response.content == "This is a test."
    assert response.usage is not None and response.usage.input_tokens == 12
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["json"]["messages"] == recorded["request"]["json"]["messages"]
    assert sent["json"]["model"] == "gpt-4o-mini" and "tools" not in sent["json"]
    assert sent["headers"]["authorization"] == "Bearer sk-test-0123456789abcdef"


def crumpet_agent(c: OpenAiCaller) -> AgentBuilder:
    schemas = {
        "lookup_population": (
            "Returns the current population of the specified fictional country",
            {
                "properties": {"country": {"type": "string"}},
                "required": ["country"],
                "type": "object",
            },
            lambda a: "123124",
        ),
        "can_have_dragons": (
            "Returns True if the specified population can have dragons, False otherwise",
            {
                "properties": {"population": {"type": "integer"}},
                "required": ["population"],
                "type": "object",
            },
            lambda a: "true",
        ),
    }
    builder = (
        AgentBuilder("Can the country of Crumpet have dragons? Answer with only YES or NO")
        .llm(c)
        .model("gpt-4o-mini")
        .config(AgentConfig(min_answer_length=1))
    )
    for name, (desc, schema, fn) in schemas.items():
        builder.tool(name, desc, schema, fn)
    return builder


def test_multi_turn_run_sends_tool_calls_and_results_natively() -> None:
    with LoopbackProvider() as server:
        for name in (
            "03_tool_call_single_nonstream_turn1",
            "04_tool_call_single_nonstream_turn2_second_call",
            "05_tool_call_single_nonstream_turn3_final_text",
        ):
            recorded = server.serve_fixture(f"openai/{name}")
        engine = crumpet_agent(caller(server)).build()
        answer = engine.run()
    assert answer == "YES"
    third = server.requests[2]["json"]
    expected = recorded["request"]["json"]["messages"]
    assert [m["role"] for m in third["messages"]] == [m["role"] for m in expected]
    sent_calls = [m["tool_calls"][0] for m in third["messages"] if m["role"] == "assistant"]
    recorded_calls = [m["tool_calls"][0] for m in expected if m["role"] == "assistant"]
    for sent, rec in zip(sent_calls, recorded_calls, strict=True):
        assert sent["id"] == rec["id"] and sent["function"]["name"] == rec["function"]["name"]
        assert json.loads(sent["function"]["arguments"]) == json.loads(rec["function"]["arguments"])
    tool_msgs = [m for m in third["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [c["id"] for c in recorded_calls]
    assert [m["content"] for m in tool_msgs] == ["SUCCESS: 123124", "SUCCESS: true"]
    assert [t["function"]["name"] for t in third["tools"]] == [
        "lookup_population",
        "can_have_dragons",
    ]
    usage = engine.memory.total_usage
    assert usage.total_tokens > 0


def test_parallel_tool_calls_and_the_second_turn() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/06_parallel_tool_calls_nonstream_turn1")
        recorded = server.serve_fixture("openai/07_parallel_tool_calls_nonstream_turn2_final_text")
        weather = {
            "Seattle, WA": "50 degrees and raining",
            "San Francisco, CA": "70 degrees and sunny",
        }
        engine = (
            AgentBuilder("What's the weather in Seattle and San Francisco today?")
            .system_prompt("You're a helpful assistant.")
            .llm(caller(server))
            .tool(
                "get_current_weather",
                "Get the current weather in a given location",
                {
                    "type": "object",
                    "properties": {"location": {"type": "string"}},
                    "required": ["location"],
                    "additionalProperties": False,
                },
                lambda a: weather[a["location"]],
            )
            .build()
        )
        answer = engine.run()
    assert "Seattle" in answer and "San Francisco" in answer
    kinds = [e.fact.event for e in engine.trace() if e.event == "Transitioned"]
    assert "LlmParallelToolCalls" in kinds
    second = server.requests[1]["json"]["messages"]
    assistant = [m for m in second if m["role"] == "assistant"]
    assert len(assistant) == 1 and len(assistant[0]["tool_calls"]) == 2
    expected_ids = [c["id"] for c in recorded["request"]["json"]["messages"][2]["tool_calls"]]
    assert [c["id"] for c in assistant[0]["tool_calls"]] == expected_ids
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == expected_ids


def test_streamed_parallel_calls_are_assembled_and_text_streams() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/08_parallel_tool_calls_stream")
        tools = ToolRegistry()
        tools.register("get_current_weather", "Weather", {"type": "object"}, lambda a: "")
        response = call(caller(server, stream=True), "weather?", tools)
    assert [c.name for c in response.calls] == ["get_current_weather"] * 2
    assert [c.args for c in response.calls] == [
        {"location": "Seattle, WA"},
        {"location": "San Francisco, CA"},
    ]
    assert all(c.id.startswith("call_") for c in response.calls)
    assert response.usage is not None and response.usage.total_tokens > 0
    assert server.requests[0]["json"]["stream"] is True
    assert server.requests[0]["json"]["stream_options"] == {"include_usage": True}


def test_stream_reaches_engine_stream_as_deltas() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/02_text_stream")
        engine = (
            AgentBuilder("Say this is a test")
            .llm(caller(server, stream=True))
            .config(AgentConfig(min_answer_length=1))
            .build()
        )

        async def collect() -> list[Any]:
            return [o async for o in engine.stream()]

        outputs = asyncio.run(collect())
    deltas = [o.text for o in outputs if isinstance(o, TextDelta)]
    assert deltas == ['"This', " is", " a", " test", '."']
    assert engine.memory.final_answer == '"This is a test."'
    responded = [e.fact for e in engine.trace() if e.event == "LlmResponded"][0]
    assert responded.response.content == '"This is a test."'  # the assembled response


def test_streamed_tool_call_turns() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/09_tool_call_stream_turn1")
        server.serve_fixture("openai/10_tool_call_stream_turn2_final_text")
        engine = (
            AgentBuilder("What is 1231 * 2331?")
            .llm(caller(server, stream=True))
            .config(AgentConfig(min_answer_length=1))
            .tool(
                "multiply",
                "Multiply two numbers.",
                {
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                    "type": "object",
                },
                lambda a: a["a"] * a["b"],
            )
            .build()
        )
        answer = engine.run()
    assert "2869461" in answer.replace(",", "")
    assert engine.memory.history[0].tool.id == "call_1EYWDzueHEp8OsB8jJSEp7WB"
    assert engine.memory.history[0].observation == "SUCCESS: 2869461"


def test_liberal_with_compatible_servers() -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "local",
        "choices": [
            {
                "index": 0,
                "finish_reason": None,
                "message": {
                    "role": "assistant",
                    "content": "Looking both up.",
                    "tool_calls": [
                        {
                            "id": "",
                            "type": "function",
                            "function": {"name": "a", "arguments": None},
                        },
                        {
                            "id": "same",
                            "type": "function",
                            "function": {"name": "b", "arguments": ""},
                        },
                        {
                            "id": "same",
                            "type": "function",
                            "function": {"name": "c", "arguments": '{"x": 1}'},
                        },
                    ],
                },
            }
        ],
    }
    with LoopbackProvider() as server:
        server.serve(200, body)
        response = call(caller(server), "go")
    assert [c.args for c in response.calls] == [{}, {}, {"x": 1}]
    ids = [c.id for c in response.calls]
    assert len(set(ids)) == 3 and ids[1] == "same"
    assert response.content == "Looking both up."  # text with tool calls is kept


def test_token_limit_is_reported() -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": "The answer is a very lo"},
            }
        ],
    }
    with LoopbackProvider() as server:
        server.serve(200, body)
        response = call(caller(server), "go")
    assert response.stop_reason == "max_tokens"


def test_errors_are_classified_and_not_retried_when_final() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/13_error_401_invalid_api_key")
        with pytest.raises(AuthenticationFailed) as auth:
            call(caller(server), "hi")
        assert len(server.requests) == 1
        server.serve_fixture("openai/16_error_400_invalid_request")
        with pytest.raises(BadRequest):
            call(caller(server), "hi")
        server.serve_fixture("openai/14_error_404_model_not_found")
        with pytest.raises(BadRequest, match="Check the model name"):
            call(caller(server), "hi")
        server.serve(
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. "
                    "However, your messages resulted in 130000 tokens.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        )
        with pytest.raises(ContextOverflow, match="^context length exceeded: This model's"):
            call(caller(server), "hi")
        assert len(server.requests) == 4
    assert "sk-test-0123456789abcdef" not in str(auth.value)
    assert "OPENAI_API_KEY" in str(auth.value)


def test_rate_limit_honours_retry_after_then_succeeds() -> None:
    with LoopbackProvider() as server:
        server.serve(
            429,
            {"error": {"message": "Rate limit reached", "type": "requests"}},
            {"content-type": "application/json", "retry-after": "2"},
        )
        server.serve(500, {"error": {"message": "The server had an error"}})
        server.serve_fixture("openai/01_text_nonstream")
        c = caller(server)
        response = call(c, "Say this is a test")
    assert response.content == "This is a test."
    assert len(server.requests) == 3
    assert c.sleeps[0] == 2.0 and 0 <= c.sleeps[1] <= 1.0  # type: ignore[attr-defined]


def test_server_errors_give_up_after_max_retries() -> None:
    with LoopbackProvider() as server:
        for _ in range(3):
            server.serve(500, {"error": {"message": "boom"}})
        with pytest.raises(ServerError, match="server error \\(500\\)"):
            call(caller(server, max_retries=2), "hi")
        assert len(server.requests) == 3
        for _ in range(2):
            server.serve(429, {"error": {"message": "slow down"}})
        with pytest.raises(RateLimited):
            call(caller(server, max_retries=1), "hi")


def test_a_failed_call_ends_the_run_with_an_actionable_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    engine = AgentBuilder("hi").llm(OpenAiCaller()).build()
    with pytest.raises(AgentFailed) as info:
        engine.run()
    assert "OPENAI_API_KEY is not set" in info.value.error
    failed = [e.fact for e in engine.trace() if e.event == "LlmFailed"][0]
    assert failed.error_type == "AuthenticationFailed"
    with LoopbackProvider() as server:
        server.serve_fixture("openai/13_error_401_invalid_api_key")
        engine = AgentBuilder("hi").llm(caller(server)).build()
        with pytest.raises(AgentFailed, match="rejected the credentials"):
            engine.run()
    text = engine.trace().to_json() + repr(engine.llm) + str(engine.memory)
    assert "sk-test-0123456789abcdef" not in text and "authorization" not in text.lower()


def test_model_comes_from_the_agent_or_the_documented_default() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/01_text_nonstream")
        server.serve_fixture("openai/01_text_nonstream")
        short = AgentConfig(min_answer_length=1)
        AgentBuilder("Say this is a test").llm(caller(server)).config(short).model(
            "my-model"
        ).build().run()
        AgentBuilder("Say this is a test").llm(caller(server, default_model="fallback")).config(
            short
        ).build().run()
    assert [r["json"]["model"] for r in server.requests] == ["my-model", "fallback"]


def test_network_errors_are_retried_then_reported() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []

    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)

    c = OpenAiCaller(
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="x",
        timeout=5,
        retry=RetryPolicy(max_retries=2, sleep=no_wait),
    )
    from agentsm.llm.errors import NetworkError

    with pytest.raises(NetworkError, match="could not be reached"):
        call(c, "hi")
    assert len(sleeps) == 2
