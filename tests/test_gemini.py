"""GeminiCaller through the official google-genai SDK, on recorded real Gemini and Vertex AI
traffic served on 127.0.0.1: what came back, and what the SDK sent on the next turn (thought
signatures on the parts that carried them, function responses in one user content)."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentEngine,
    AgentFailed,
    AgentMemory,
    BuildError,
    History,
    HistoryEntry,
    LlmResponse,
    ReasoningDelta,
    TextDelta,
    TextRetracted,
    TokenUsage,
    ToolCall,
    ToolRegistry,
)
from agentsm import facts as f
from agentsm.llm import (
    AuthenticationFailed,
    BadRequest,
    GeminiCaller,
    RateLimited,
    RetryPolicy,
)
from agentsm.llm._gemini_wire import gemini_contents, usage_of
from replay import replay_run

from .loopback import LoopbackProvider, fixture

KEY = "AIza-test-0123456789abcdef"
SSE = {"content-type": "text/event-stream"}
ENV = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GEMINI_MODEL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    "GOOGLE_GENAI_API_VERSION",
)


@pytest.fixture(autouse=True)
def _no_google_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def caller(server: LoopbackProvider, **kwargs: Any) -> GeminiCaller:
    """A caller on the loopback server, on the API version the recordings used."""
    sleeps: list[float] = kwargs.pop("sleeps", [])

    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)

    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("api_version", "v1beta")
    policy = RetryPolicy(max_retries=kwargs.pop("max_retries", 0), sleep=no_wait)
    return GeminiCaller(base_url=server.url, retry=policy, **kwargs)


def recorded(name: str) -> dict[str, Any]:
    return fixture(f"google/{name}")


def body_of(interaction: dict[str, Any]) -> dict[str, Any]:
    return json.loads(interaction["response"]["body"])  # type: ignore[no-any-return]


def chunks_of(interaction: dict[str, Any]) -> list[dict[str, Any]]:
    lines = interaction["response"]["body"].splitlines()
    return [json.loads(line[5:]) for line in lines if line.startswith("data:")]


def as_agentsm_sends(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recorded `contents` with the recorder's own additions in agentsm's form: pydantic-ai
    gave calls ids of its own ("pyd_ai_...", the API returns none) and wrapped results as
    `{"return_value": ...}`; agentsm matches results by order and sends `{"output": ...}`."""
    contents = copy.deepcopy(contents)
    for content in contents:
        for part in content["parts"]:
            for key in ("functionCall", "functionResponse"):
                part.get(key, {}).pop("id", None)
            if "functionResponse" in part:
                value = part["functionResponse"]["response"]["return_value"]
                part["functionResponse"]["response"] = {"output": f"SUCCESS: {value}"}
    return contents


def first_response(engine: AgentEngine) -> LlmResponse:
    fact = next(e.fact for e in engine.trace() if e.event == "LlmResponded")
    assert isinstance(fact, f.LlmResponded)
    return fact.response


def streamed(engine: AgentEngine) -> list[Any]:
    async def collect() -> list[Any]:
        return [o async for o in engine.stream()]

    return asyncio.run(collect())


def committed(response: LlmResponse, *observations: str) -> AgentMemory:
    """The memory of a run that committed `response`'s calls with these results."""
    entries = tuple(
        HistoryEntry(
            step=1,
            tool=call,
            observation=f"SUCCESS: {seen}",
            success=True,
            text=response.content if i == 0 else None,
            reasoning=response.reasoning if i == 0 else (),
        )
        for i, (call, seen) in enumerate(zip(response.calls, observations, strict=True))
    )
    return AgentMemory(task="", history=History(entries))


# -- plain text, and what is sent ------------------------------------------------------------


def test_a_text_answer_and_the_request_as_recorded() -> None:
    with LoopbackProvider() as server:
        interaction = server.serve_fixture("google/01_text_nonstream")
        c = caller(server, default_model="gemini-2.5-flash")
        memory = AgentMemory(task="Hello!", system_prompt="You are a chatbot.")
        response = asyncio.run(c.call(memory, ToolRegistry(), ""))
    request = server.requests[0]
    assert request["path"] == interaction["request"]["path"]
    wanted = interaction["request"]["json"]
    assert request["json"]["contents"] == wanted["contents"]
    assert request["json"]["systemInstruction"] == wanted["systemInstruction"]
    assert request["headers"]["x-goog-api-key"] == KEY
    assert response.content == "Hello! How can I help you today?"
    assert response.model == "gemini-2.5-flash" and response.stop_reason == "stop"
    assert response.usage is not None  # thoughts (34) are output tokens
    assert (response.usage.input_tokens, response.usage.output_tokens) == (9, 9 + 34)
    assert response.usage.reasoning_tokens == 34
    assert response.reasoning == ()


# -- function calls, thought signatures, parallel calls --------------------------------------


def country_agent(server: LoopbackProvider, db: Path, **kwargs: Any) -> AgentBuilder:
    task = recorded("02_function_call_thought_signature_turn1")["request"]["json"]["contents"]
    schema = {"type": "object", "additionalProperties": False, "properties": {}}
    return (
        AgentBuilder(task[0]["parts"][0]["text"])
        .llm(caller(server, default_model="gemini-2.5-pro", **kwargs))
        .tool("get_user_country", "", schema, lambda args: "Mexico")
        .store(db)
    )


def test_a_call_and_its_thought_signature_go_back_as_recorded_and_replay(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        turn1 = server.serve_fixture("google/02_function_call_thought_signature_turn1")
        turn2 = server.serve_fixture("google/03_function_response_turn2_final_text")
        engine = country_agent(server, db).build()
        answer = engine.run()
    assert answer == "The largest city in Mexico is Mexico City."
    first, second = (r["json"] for r in server.requests)
    assert first["contents"] == turn1["request"]["json"]["contents"]
    declared = first["tools"][0]["functionDeclarations"][0]
    assert declared["name"] == "get_user_country"
    # the second turn: the model's functionCall part with its signature, then the result
    assert second["contents"] == as_agentsm_sends(turn2["request"]["json"]["contents"])
    assert [c["role"] for c in second["contents"]] == ["user", "model", "user"]
    # what came back: the call got an id from its place, the signature is recorded
    (call,) = engine.memory.history
    assert call.tool.id == "call_1_0" and call.tool.name == "get_user_country"
    (signed,) = call.reasoning
    came = body_of(turn1)["candidates"][0]["content"]["parts"][0]
    assert signed.kind == "redacted" and signed.provider == "gemini"
    assert dict(signed.native) == {"index": 0, "part": came, "call": "call_1_0"}
    # recorded once, replayed identical offline (from the log alone, and rebuilt)
    assert replay_run(db, engine.run_id).identical
    assert replay_run(db, engine.run_id, lambda task: country_agent(server, db)).identical


def test_parallel_calls_and_their_results_in_one_user_content() -> None:
    turn1 = recorded("04_parallel_function_calls_turn1")
    turn2 = recorded("05_parallel_function_responses_turn2")
    system = turn1["request"]["json"]["systemInstruction"]["parts"][0]["text"]
    with LoopbackProvider() as server:
        server.serve_fixture("google/04_parallel_function_calls_turn1")
        server.serve_fixture("google/05_parallel_function_responses_turn2")
        c = caller(server, default_model="gemini-3-flash-preview", tool_choice="required")
        tools = ToolRegistry()
        tools.register("generate_topic", "", {"type": "object", "properties": {}}, lambda a: "x")
        response = asyncio.run(c.call(AgentMemory(task="", system_prompt=system), tools, ""))
        assert [call.id for call in response.calls] == ["call_0_0", "call_0_1", "call_0_2"]
        assert [p.native["index"] for p in response.reasoning] == [0]  # one signature
        memory = committed(response, "cars", "penguins", "cars").model_copy(
            update={"system_prompt": system}
        )
        again = asyncio.run(c.call(memory, tools, ""))
    first, second = (r["json"] for r in server.requests)
    assert first["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}}
    assert second["contents"] == as_agentsm_sends(turn2["request"]["json"]["contents"])
    (answers,) = [c for c in second["contents"][2:]]
    assert [list(p) for p in answers["parts"]] == [["functionResponse"]] * 3
    assert again.calls[0].name == "generate_topic" and len(again.reasoning) == 1


def test_thought_parts_are_reasoning_and_go_back_with_the_signed_text() -> None:
    turn1 = recorded("06_thought_parts_turn1")
    turn2 = recorded("07_thought_parts_turn2_sent_back")
    with LoopbackProvider() as server:
        server.serve_fixture("google/06_thought_parts_turn1")
        server.serve_fixture("google/07_thought_parts_turn2_sent_back")
        c = caller(
            server, default_model="gemini-3-pro-preview", thinking={"include_thoughts": True}
        )
        task = turn1["request"]["json"]["contents"][0]["parts"][0]["text"]
        response = asyncio.run(c.call(AgentMemory(task=task), ToolRegistry(), ""))
        thought, answer = body_of(turn1)["candidates"][0]["content"]["parts"]
        assert response.content == answer["text"]  # the thought is not answer text
        assert [(p.kind, p.text) for p in response.reasoning] == [
            ("thinking", thought["text"]),
            ("redacted", ""),
        ]
        assert [dict(p.native)["part"] for p in response.reasoning] == [thought, answer]
        # the next request of a run that committed this response with a call
        noop = response.model_copy(update={"calls": (ToolCall(name="noop", id="c1"),)})
        asyncio.run(c.call(committed(noop, "done").model_copy(update={"task": task}), *_noop()))
    first, second = (r["json"] for r in server.requests)
    wanted = turn1["request"]["json"]["generationConfig"]["thinkingConfig"]
    assert first["generationConfig"] == {"thinkingConfig": wanted}  # the API's own object
    sent_model, recorded_model = second["contents"][1], turn2["request"]["json"]["contents"][1]
    assert sent_model["parts"][:2] == recorded_model["parts"]  # thought, then signed text
    assert sent_model["parts"][2] == {"functionCall": {"args": {}, "name": "noop"}}


def _noop() -> tuple[ToolRegistry, str]:
    tools = ToolRegistry()
    tools.register("noop", "", {"type": "object", "properties": {}}, lambda a: "done")
    return tools, ""


def test_parts_are_put_back_in_their_places() -> None:
    signature = "c2lnbmVk"
    reasoning = [
        {"provider": "gemini", "native": {"index": 0, "part": {"text": "hm", "thought": True}}},
        {
            "provider": "gemini",
            "native": {"index": 2, "part": {"text": "", "thoughtSignature": signature}},
        },
        {
            "provider": "gemini",
            "native": {
                "index": 4,
                "part": {"functionCall": {"name": "gone", "args": {}}, "thoughtSignature": "x"},
                "call": "not-in-this-turn",
            },
        },
        {"provider": "anthropic", "native": {"type": "thinking"}},
    ]
    message = {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [{"id": "a", "name": "look", "arguments": {"q": 1}}],
        "reasoning": reasoning,
    }
    from agentsm.llm._gemini_wire import model_parts

    assert model_parts(message) == [
        {"text": "hm", "thought": True},
        {"text": "Let me look."},
        {"text": "", "thoughtSignature": signature},
        {"functionCall": {"name": "look", "args": {"q": 1}}},
    ]


def test_usage_counts_cached_prompt_tokens_as_cache_reads() -> None:
    from google.genai import types

    meta = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=1000,
        cached_content_token_count=800,
        candidates_token_count=20,
        thoughts_token_count=5,
    )
    assert usage_of(meta) == TokenUsage(
        input_tokens=200, output_tokens=25, cache_read_tokens=800, reasoning_tokens=5
    )


# -- streaming ----------------------------------------------------------------------------------


def capital_agent(server: LoopbackProvider, db: Path) -> AgentBuilder:
    task = recorded("08_stream_function_call_thought_signature_turn1")["request"]["json"]
    schema = {"type": "object", "additionalProperties": False, "properties": {}}
    return (
        AgentBuilder(task["contents"][0]["parts"][0]["text"])
        .llm(caller(server, default_model="gemini-3-pro-preview", stream=True))
        .tool("get_country", "", schema, lambda args: "Mexico")
        .store(db)
    )


def test_a_streamed_call_keeps_its_signature_and_the_text_streams(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        turn1 = server.serve_fixture("google/08_stream_function_call_thought_signature_turn1")
        turn2 = server.serve_fixture("google/09_stream_text_turn2")
        engine = capital_agent(server, db).build()
        outputs = streamed(engine)
    assert [r["path"] for r in server.requests] == [turn1["request"]["path"]] * 2
    assert server.requests[0]["json"]["contents"] == turn1["request"]["json"]["contents"]
    sent = server.requests[1]["json"]["contents"]
    assert sent == as_agentsm_sends(turn2["request"]["json"]["contents"])
    text = "".join(o.text for o in outputs if isinstance(o, TextDelta))
    assert text == "The capital of Mexico is Mexico City." == engine.memory.final_answer
    final = [e.fact for e in engine.trace() if isinstance(e.fact, f.LlmResponded)][-1]
    assert isinstance(final, f.LlmResponded) and final.response.usage is not None
    usage = final.response.usage
    assert (usage.input_tokens, usage.output_tokens) == (257, 8)  # the last chunk's
    assert final.response.stop_reason == "stop"
    assert replay_run(db, engine.run_id).identical


def test_streamed_thoughts_are_reasoning_deltas_and_one_thought_part() -> None:
    interaction = recorded("10_stream_thought_parts")
    with LoopbackProvider() as server:
        server.serve_fixture("google/10_stream_thought_parts")
        c = caller(server, default_model="gemini-2.5-pro", stream=True, thinking="high")
        engine = AgentBuilder("How do I cross the street?").llm(c).build()
        outputs = streamed(engine)
    config = server.requests[0]["json"]["generationConfig"]
    assert config["thinkingConfig"] == {"include_thoughts": True, "thinking_budget": 24576}
    assert server.requests[0]["path"] == interaction["request"]["path"]
    parts = [
        p for chunk in chunks_of(interaction) for p in chunk["candidates"][0]["content"]["parts"]
    ]
    thoughts = "".join(p["text"] for p in parts if p.get("thought"))
    answer = "".join(p["text"] for p in parts if not p.get("thought"))
    shown = "".join(o.text for o in outputs if isinstance(o, ReasoningDelta))
    said = [o for o in outputs if isinstance(o, ReasoningDelta | TextDelta)]
    assert shown == thoughts and isinstance(said[0], ReasoningDelta)
    assert "".join(o.text for o in said if isinstance(o, TextDelta)) == answer
    response = first_response(engine)
    assert response.content == answer == engine.memory.final_answer
    thought, signed = response.reasoning
    assert thought.kind == "thinking" and thought.text == thoughts
    signature = next(p["thoughtSignature"] for p in parts if "thoughtSignature" in p)
    assert dict(signed.native) == {
        "index": 1,
        "part": {"text": answer, "thoughtSignature": signature},
    }
    assert response.usage is not None and response.usage.output_tokens == 469 + 787


def test_a_cut_stream_is_retried_and_its_text_retracted() -> None:
    body = recorded("09_stream_text_turn2")["response"]["body"]
    cut = body.index("data:", body.index("data:") + 1)  # after the first chunk
    sleeps: list[float] = []
    with LoopbackProvider() as server:
        server.serve_fixture("google/09_stream_text_turn2", cut_after=cut + 20)
        server.serve_fixture("google/09_stream_text_turn2")
        c = caller(server, stream=True, max_retries=1, sleeps=sleeps)
        builder = AgentBuilder("Say it").llm(c).config(AgentConfig(min_answer_length=1))
        outputs = streamed(builder.build())
    (retracted,) = [o for o in outputs if isinstance(o, TextRetracted)]
    assert retracted.text == "The capital of Mexico" and "could not be reached" in retracted.reason
    assert len(server.requests) == 2 and len(sleeps) == 1


# -- errors ------------------------------------------------------------------------------------


def test_a_missing_model_is_a_bad_request_named_and_not_retried() -> None:
    sleeps: list[float] = []
    with LoopbackProvider() as server:
        interaction = server.serve_fixture("google/11_error_404_model_not_found")
        c = caller(server, max_retries=2, sleeps=sleeps)
        with pytest.raises(BadRequest) as info:
            asyncio.run(c.call(AgentMemory(task="hello"), ToolRegistry(), "gemini-3.6-flahs"))
    assert server.requests[0]["path"] == interaction["request"]["path"]
    assert info.value.status == 404 and sleeps == []
    message = str(info.value)
    assert "not found (404)" in message and "gemini-3.6-flahs is not found" in message
    assert "Check the model name" in message and KEY not in message


def test_rate_limits_and_server_errors_are_retried_as_the_server_asks() -> None:
    limited = {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
    broken = {
        "error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    }
    sleeps: list[float] = []
    with LoopbackProvider() as server:
        server.serve(429, limited, {"content-type": "application/json", "retry-after": "2"})
        server.serve(503, broken)
        server.serve_fixture("google/01_text_nonstream")
        c = caller(server, max_retries=2, sleeps=sleeps)
        answer = asyncio.run(c.call(AgentMemory(task="Hello!"), ToolRegistry(), "m"))
        assert answer.content and sleeps[0] == 2.0 and len(sleeps) == 2
        server.serve(429, limited)
        with pytest.raises(RateLimited, match="Quota exceeded"):
            asyncio.run(caller(server).call(AgentMemory(task="Hello!"), ToolRegistry(), "m"))


def test_keys_come_from_either_variable_and_are_never_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with LoopbackProvider() as server:
        c = caller(server, api_key=None)
        assert "api_key=missing" in repr(c)
        with pytest.raises(AuthenticationFailed, match="GEMINI_API_KEY is not set"):
            asyncio.run(c.call(AgentMemory(task="Hello!"), ToolRegistry(), "m"))
        with pytest.raises(BuildError, match="GEMINI_API_KEY is not set"):
            GeminiCaller.from_env()
        monkeypatch.setenv("GOOGLE_API_KEY", "AIza-from-google-env-123")
        denied = {"error": {"code": 403, "message": "key AIza-from-google-env-123 is invalid"}}
        server.serve(403, denied)
        with pytest.raises(AuthenticationFailed) as info:
            asyncio.run(c.call(AgentMemory(task="Hello!"), ToolRegistry(), "m"))
        monkeypatch.delenv("GOOGLE_API_KEY")
        monkeypatch.setenv("GEMINI_API_KEY", "AIza-from-gemini-env-456")
        server.serve_fixture("google/01_text_nonstream")
        asyncio.run(
            GeminiCaller.from_env(base_url=server.url).call(
                AgentMemory(task="Hello!"), ToolRegistry(), "m"
            )
        )
    assert server.requests[0]["headers"]["x-goog-api-key"] == "AIza-from-google-env-123"
    assert server.requests[1]["headers"]["x-goog-api-key"] == "AIza-from-gemini-env-456"
    assert "AIza-from" not in str(info.value) and "Check GEMINI_API_KEY" in str(info.value)
    assert "api_key=set" in repr(c) and "AIza" not in repr(c)


# -- Vertex AI -----------------------------------------------------------------------------------


def test_vertex_ai_path_credentials_and_answer() -> None:
    from google.oauth2.credentials import Credentials

    interaction = recorded("12_vertex_text_nonstream")
    with LoopbackProvider() as server:
        server.serve_fixture("google/12_vertex_text_nonstream")
        c = GeminiCaller(
            vertexai=True,
            project="pydantic-ai",
            location="global",
            credentials=Credentials(token="ya29.test-token"),  # type: ignore[no-untyped-call]  # no Google sign-in attempted
            base_url=server.url,
            default_model="gemini-2.0-flash",
            retry=RetryPolicy(max_retries=0),
        )
        memory = AgentMemory(task="What is the capital of France?")
        memory = memory.model_copy(update={"system_prompt": "You are a helpful chatbot."})
        response = asyncio.run(c.call(memory, ToolRegistry(), ""))
    request = server.requests[0]
    assert request["path"] == interaction["request"]["path"]
    assert request["headers"]["authorization"] == "Bearer ya29.test-token"
    assert "x-goog-api-key" not in request["headers"]
    for key in ("contents", "systemInstruction"):
        assert request["json"][key] == interaction["request"]["json"][key]
    assert response.content == "The capital of France is Paris.\n"
    assert response.usage is not None and response.usage.input_tokens == 13
    assert c.settings == {"provider": "Gemini", "vertexai": True}
    assert "vertexai=True, project='pydantic-ai', location='global'" in repr(c)
    assert "credentials=Credentials" in repr(c) and "ya29" not in repr(c)
    with pytest.raises(BuildError, match="add vertexai=True"):
        GeminiCaller(project="p")
    with pytest.raises(BuildError, match="exclude each other"):
        GeminiCaller(vertexai=True, api_key="k", credentials=Credentials(token="t"))  # type: ignore[no-untyped-call]


def test_vertex_ai_express_mode_with_an_api_key() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("google/12_vertex_text_nonstream")
        c = GeminiCaller(vertexai=True, api_key=KEY, base_url=server.url)
        assert (c.project, c.location) == (None, None)
        response = asyncio.run(c.call(AgentMemory(task="hi"), ToolRegistry(), "gemini-2.0-flash"))
    request = server.requests[0]
    assert request["path"] == "/v1beta1/publishers/google/models/gemini-2.0-flash:generateContent"
    assert request["headers"]["x-goog-api-key"] == KEY and "authorization" not in request["headers"]
    assert response.content == "The capital of France is Paris.\n"


def test_vertex_credentials_that_cannot_be_refreshed_fail_as_authentication() -> None:
    from google.oauth2.credentials import Credentials

    with LoopbackProvider() as server:
        c = GeminiCaller(
            vertexai=True,
            project="p",
            credentials=Credentials(token=None),  # type: ignore[no-untyped-call]
            base_url=server.url,
            retry=RetryPolicy(max_retries=2),
        )
        with pytest.raises(AuthenticationFailed) as info:
            asyncio.run(c.call(AgentMemory(task="hi"), ToolRegistry(), "gemini-2.0-flash"))
    assert server.requests == []
    assert "Vertex AI" in str(info.value) and "RefreshError" in str(info.value)
    assert "Application Default Credentials" in str(info.value)


# -- one caller, many runs; settings ---------------------------------------------------------


def test_one_caller_serves_runs_on_many_loops_and_threads() -> None:
    with LoopbackProvider() as server:
        c = caller(server)
        builder = AgentBuilder("Hello!").llm(c).config(AgentConfig(min_answer_length=1))

        async def two_runs() -> None:
            for _ in range(2):
                server.serve_fixture("google/01_text_nonstream")
                await builder.build().arun()
            await c.aclose()

        asyncio.run(two_runs())
        for _ in range(4):
            server.serve_fixture("google/01_text_nonstream")
        answers: list[str] = []
        threads = [
            threading.Thread(target=lambda: answers.append(builder.build().run())) for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ports = [r["port"] for r in server.requests]
    assert ports[0] == ports[1]  # kept alive and reused on one loop
    assert len(answers) == 4 and len(set(answers)) == 1


def test_settings_reach_the_server_and_the_run_definition() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("google/01_text_nonstream")
        c = caller(
            server,
            temperature=0.2,
            top_p=0.9,
            top_k=20,
            max_tokens=300,
            tool_choice="lookup",
            thinking="low",
            extra_body={"generationConfig": {"seed": 7}},
        )
        engine = (
            AgentBuilder("Hello!")
            .llm(c)
            .model("gemini-3-flash-preview")
            .config(AgentConfig(min_answer_length=1))
            .tool("lookup", "Look up.", {"type": "object"}, lambda a: "x")
            .build()
        )
        engine.run()
    sent = server.requests[0]["json"]
    assert sent["generationConfig"] == {
        "temperature": 0.2,
        "topP": 0.9,
        "topK": 20.0,
        "maxOutputTokens": 300,
        "thinkingConfig": {"include_thoughts": True, "thinking_level": "LOW"},
        "seed": 7,
    }
    assert sent["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}
    }
    started = engine.trace()[0].fact
    assert started.llm == {  # type: ignore[union-attr]
        "provider": "Gemini",
        "temperature": 0.2,
        "top_p": 0.9,
        "tool_choice": "lookup",
        "thinking": "low",
        "top_k": 20,
        "max_tokens": 300,
        "extra_body": {"generationConfig": {"seed": 7}},
    }
    with pytest.raises(BuildError, match="parallel_tool_calls"):
        GeminiCaller(parallel_tool_calls=False)
    with pytest.raises(BuildError, match="is not a level"):
        GeminiCaller(thinking="extreme")


def test_without_the_sdk_building_says_how_to_install() -> None:
    script = (
        "import sys\n"
        "sys.modules['google.genai'] = None  # as if not installed\n"
        "import agentsm\n"
        "try:\n"
        "    agentsm.GeminiCaller(api_key='k')\n"
        "except agentsm.BuildError as e:\n"
        "    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert "google-genai SDK, which is not installed: pip install 'agentsm[google]'" in done.stdout


def test_the_conversation_in_gemini_contents() -> None:
    memory = AgentMemory(task="Find it", system_prompt="Be brief.")
    assert gemini_contents(memory) == (
        "Be brief.",
        [{"role": "user", "parts": [{"text": "Find it"}]}],
    )


def test_a_failed_run_on_gemini_names_the_server(tmp_path: Path) -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("google/11_error_404_model_not_found")
        engine = AgentBuilder("hello").llm(caller(server)).build()
        with pytest.raises(AgentFailed, match="BadRequest: the Gemini-compatible server at"):
            engine.run()
