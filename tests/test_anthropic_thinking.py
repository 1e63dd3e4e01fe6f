"""Extended thinking and prompt caching through the official anthropic SDK, on recorded real
traffic served on 127.0.0.1: what came back, and what the SDK sent on the next turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentEngine,
    AgentMemory,
    BuildError,
    History,
    HistoryEntry,
    LlmResponse,
    MockLlmCaller,
    ReasoningDelta,
    ReasoningPart,
    TextDelta,
    TextRetracted,
    ToolCall,
    ToolRegistry,
)
from agentsm import facts as f
from agentsm.catalog import cost_of
from agentsm.llm import AnthropicCaller, OpenAiCaller, RetryPolicy
from agentsm.llm.anthropic import anthropic_messages
from agentsm.memory import fold
from agentsm.trace import summarize
from eventstore import SQLiteEventStore
from replay import replay_run
from replay.cli import main

from .loopback import LoopbackProvider, fixture

KEY = "sk-ant-test-0123456789abcdef"
THINKING = "anthropic_thinking"


def caller(server: LoopbackProvider, **kwargs: Any) -> AnthropicCaller:
    return AnthropicCaller(
        base_url=server.url, api_key=KEY, retry=RetryPolicy(max_retries=0), **kwargs
    )


def call(c: AnthropicCaller, memory: AgentMemory, tools: ToolRegistry | None = None) -> LlmResponse:
    return asyncio.run(c.call(memory, tools or ToolRegistry(), ""))


def blocks_of(interaction: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of a recorded (non-streamed) response."""
    return json.loads(interaction["response"]["body"])["content"]  # type: ignore[no-any-return]


def request_but_messages(sent: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sent.items() if k not in ("messages", "stream")}


def first_response(engine: AgentEngine) -> LlmResponse:
    """The run's first recorded LLM response."""
    fact = next(e.fact for e in engine.trace() if e.event == "LlmResponded")
    assert isinstance(fact, f.LlmResponded)
    return fact.response


# -- turns of an agent that uses a tool with thinking on --------------------------------------

TOOL_TURNS: dict[str, tuple[str, str, dict[str, Any], tuple[str, str, dict[str, Any], str]]] = {
    "plain": (
        "03_thinking_tool_use_turn1",
        "04_thinking_tool_use_turn2_thinking_sent_back",
        {
            "default_model": "claude-sonnet-4-0",
            "thinking": 3000,
            "max_tokens": 4096,
            "tool_choice": "auto",
        },
        ("get_user_country", "", {"additionalProperties": False, "properties": {}}, "Mexico"),
    ),
    "stream": (
        "08_thinking_tool_use_stream_turn1",
        "09_thinking_tool_use_stream_turn2_thinking_sent_back",
        {
            "default_model": "claude-haiku-4-5-20251001",
            "stream": True,
            "max_tokens": 64000,
            "temperature": 1.0,
            "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "summarized"},
        },
        ("fixed_version", "Return a fixed test version string", {"properties": {}}, "0.32a0"),
    ),
}


def tool_agent(server: LoopbackProvider, shape: str, db: Path) -> AgentBuilder:
    first, _, options, (name, description, schema, result) = TOOL_TURNS[shape]
    task = fixture(f"{THINKING}/{first}")["request"]["json"]["messages"][0]["content"][0]["text"]
    return (
        AgentBuilder(task)
        .llm(caller(server, **options))
        .tool(name, description, {**schema, "type": "object"}, lambda args: result)
        .store(db)
    )


@pytest.mark.parametrize("shape", sorted(TOOL_TURNS))
def test_thinking_blocks_are_sent_back_unchanged_first_in_their_turn(
    shape: str, tmp_path: Path
) -> None:
    first, second, _, _ = TOOL_TURNS[shape]
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        turn1 = server.serve_fixture(f"{THINKING}/{first}")
        turn2 = server.serve_fixture(f"{THINKING}/{second}")
        engine = tool_agent(server, shape, db).build()

        async def collect() -> list[Any]:
            return [o async for o in engine.stream()]

        outputs = asyncio.run(collect())
    # what the SDK sent: the settings as recorded, then the thinking block sent back as it came
    assert request_but_messages(server.requests[0]["json"]) == request_but_messages(
        turn1["request"]["json"]
    )
    assert request_but_messages(server.requests[1]["json"]) == request_but_messages(
        turn2["request"]["json"]
    )
    sent, recorded = server.requests[1]["json"]["messages"], turn2["request"]["json"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[:2] == recorded[:2]  # the task, then thinking (+ text) + tool_use, unchanged
    assert sent[1]["content"][0]["type"] == "thinking"
    assert sent[2]["content"][0]["tool_use_id"] == recorded[2]["content"][0]["tool_use_id"]
    # what came back: the thinking recorded with the response and kept in history
    thought = engine.memory.history[0].reasoning
    assert (
        len(thought) == 1 and thought[0].kind == "thinking" and thought[0].provider == "anthropic"
    )
    assert dict(thought[0].native) == recorded[1]["content"][0]
    assert thought[0].text == recorded[1]["content"][0]["thinking"]
    assert engine.memory.final_answer
    if shape == "stream":  # the thinking streamed as its own output, before the answer
        said = [o for o in outputs if isinstance(o, ReasoningDelta | TextDelta)]
        assert "".join(o.text for o in said if isinstance(o, ReasoningDelta)) == thought[0].text
        assert isinstance(said[0], ReasoningDelta) and isinstance(said[-1], TextDelta)
    # shown in the trace, and replayed identical offline from the log alone
    lines = [summarize(e.fact) for e in engine.trace() if e.event == "LlmResponded"]
    assert lines[0].startswith("thought '")
    assert replay_run(db, engine.run_id).identical
    assert replay_run(db, engine.run_id, lambda task: tool_agent(server, shape, db)).identical


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("01_thinking_text_turn1", "02_thinking_text_turn2_thinking_sent_back"),
        ("05_redacted_thinking_turn1", "06_redacted_thinking_turn2_sent_back"),
    ],
)
def test_thinking_and_redacted_blocks_round_trip_as_recorded(first: str, second: str) -> None:
    with LoopbackProvider() as server:
        turn1 = server.serve_fixture(f"{THINKING}/{first}")
        turn2 = server.serve_fixture(f"{THINKING}/{second}")
        c = caller(server, thinking="low", max_tokens=4096)
        task = turn1["request"]["json"]["messages"][0]["content"][0]["text"]
        response = call(c, AgentMemory(task=task))
        came = blocks_of(turn1)
        assert [dict(p.native) for p in response.reasoning] == came[:1]
        assert response.content == came[1]["text"]
        # the next request of a run that committed this response's turn
        entry = HistoryEntry(
            step=1,
            tool=ToolCall(name="noop", id="toolu_1"),
            observation="SUCCESS: done",
            success=True,
            text=response.content,
            reasoning=response.reasoning,
        )
        again = call(c, AgentMemory(task=task, history=History((entry,))))
    sent = server.requests[1]["json"]
    assert sent["thinking"] == turn2["request"]["json"]["thinking"]
    assert sent["messages"][1]["content"][:2] == turn2["request"]["json"]["messages"][1]["content"]
    assert [dict(p.native) for p in again.reasoning] == blocks_of(turn2)[:1]
    if "redacted" in first:
        assert response.reasoning[0].kind == "redacted" and response.reasoning[0].text == ""
        assert "1 redacted" in summarize(f.LlmResponded(purpose="plan", response=response))


def test_thinking_streams_and_its_signature_is_kept() -> None:
    with LoopbackProvider() as server:
        recorded = server.serve_fixture(f"{THINKING}/07_thinking_stream")
        engine = (
            AgentBuilder("How do I cross the street?")
            .llm(caller(server, stream=True, thinking="low", max_tokens=4096))
            .build()
        )

        async def collect() -> list[Any]:
            return [o async for o in engine.stream()]

        outputs = asyncio.run(collect())
    sent = server.requests[0]["json"]
    assert sent["thinking"] == recorded["request"]["json"]["thinking"]
    assert sent["max_tokens"] == recorded["request"]["json"]["max_tokens"]
    events = [
        json.loads(line[6:])
        for line in recorded["response"]["body"].splitlines()
        if line.startswith("data: ")
    ]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    thinking = "".join(d.get("thinking", "") for d in deltas)
    signature = next(d["signature"] for d in deltas if d["type"] == "signature_delta")
    shown = "".join(o.text for o in outputs if isinstance(o, ReasoningDelta))
    answer = "".join(o.text for o in outputs if isinstance(o, TextDelta))
    assert shown == thinking and answer == engine.memory.final_answer
    (part,) = first_response(engine).reasoning
    assert dict(part.native) == {"type": "thinking", "thinking": thinking, "signature": signature}


def test_a_failed_streaming_attempt_retracts_its_thinking_too() -> None:
    async def no_wait(seconds: float) -> None:
        pass

    with LoopbackProvider() as server:
        server.serve_fixture(f"{THINKING}/07_thinking_stream", cut_after=1500)
        server.serve_fixture(f"{THINKING}/07_thinking_stream")
        c = caller(server, stream=True, thinking="low", max_tokens=4096)
        c.retry = RetryPolicy(max_retries=1, sleep=no_wait)
        engine = AgentBuilder("How do I cross the street?").llm(c).build()

        async def collect() -> list[Any]:
            return [o async for o in engine.stream()]

        outputs = asyncio.run(collect())
    (retracted,) = [o for o in outputs if isinstance(o, TextRetracted)]
    assert retracted.reasoning.startswith("This") and retracted.text == ""
    after = outputs[outputs.index(retracted) :]
    again = "".join(o.text for o in after if isinstance(o, ReasoningDelta))
    assert again == first_response(engine).reasoning[0].text


# -- the thinking setting ---------------------------------------------------------------------


def test_thinking_levels_budgets_and_what_is_recorded() -> None:
    assert AnthropicCaller().settings == {"provider": "Anthropic", "max_tokens": 4096}
    high = AnthropicCaller(thinking="high")
    assert high.settings == {"provider": "Anthropic", "thinking": "high", "max_tokens": 20480}
    request = high._request(AgentMemory(task="t"), ToolRegistry(), "m")
    assert request["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert request["max_tokens"] > 16384
    own = {"type": "enabled", "budget_tokens": 2048, "display": "summarized"}
    sent = AnthropicCaller(thinking=own)._request(AgentMemory(task="t"), ToolRegistry(), "m")
    assert sent["thinking"] == own
    assert AnthropicCaller(thinking=2000).max_tokens == 6096
    refused: list[tuple[dict[str, Any], str]] = [
        ({"thinking": 2048, "max_tokens": 2048}, "no room for the answer"),
        ({"thinking": 500}, "least thinking budget"),
        ({"thinking": "extreme"}, "is not a level"),
        ({"thinking": True}, "is not a level"),
        ({"cache": "everything"}, "is not 'auto', 'off'"),
        ({"cache": "auto", "cache_ttl": "1d"}, "neither '5m' nor '1h'"),
    ]
    for bad, match in refused:
        with pytest.raises(BuildError, match=match):
            AnthropicCaller(**bad)
    with pytest.raises(BuildError, match="takes an effort"):
        OpenAiCaller(thinking=1024)


def test_openai_thinking_is_sent_as_reasoning_effort() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture("openai/01_text_nonstream")
        c = OpenAiCaller(base_url=server.url, api_key="sk-test", thinking="high")
        asyncio.run(c.call(AgentMemory(task="hi"), ToolRegistry(), "gpt-test"))
    assert server.requests[0]["json"]["reasoning_effort"] == "high"
    assert c.settings["thinking"] == "high"
    assert OpenAiCaller(thinking="minimal").settings["thinking"] == "minimal"


def test_the_thinking_setting_is_recorded_in_the_run_definition(tmp_path: Path) -> None:
    with LoopbackProvider() as server:
        server.serve_fixture(f"{THINKING}/01_thinking_text_turn1")
        engine = (
            AgentBuilder("How do I cross the street?")
            .llm(caller(server, thinking="low", max_tokens=4096, cache="auto"))
            .build()
        )
        engine.run()
    started = engine.trace()[0].fact
    assert isinstance(started, f.RunStarted)
    assert started.llm == {
        "provider": "Anthropic",
        "thinking": "low",
        "max_tokens": 4096,
        "cache": "auto",
    }


# -- reasoning in memory and messages ---------------------------------------------------------


def part(text: str, provider: str = "anthropic") -> ReasoningPart:
    native = {"type": "thinking", "thinking": text, "signature": "sig"}
    return ReasoningPart(text=text, provider=provider, native=native)


def test_reasoning_travels_with_its_turn_and_other_providers_parts_stay_home() -> None:
    ours, theirs = part("mine"), part("not mine", provider="openai-responses")
    llm = MockLlmCaller(
        [
            LlmResponse(
                calls=(ToolCall(name="echo", args={"x": 1}, id="c1"),),
                content="Checking.",
                reasoning=(ours, theirs),
            ),
            LlmResponse.final_answer("An answer that is long enough."),
        ]
    )
    engine = AgentBuilder("t").llm(llm).tool("echo", "", {"type": "object"}, lambda a: "ok").build()
    engine.run()
    said = llm.calls[1].memory.build_messages()[1]
    assert said["role"] == "assistant" and [p["text"] for p in said["reasoning"]] == [
        "mine",
        "not mine",
    ]
    _, turns = anthropic_messages(llm.calls[1].memory)
    assert turns[1]["content"][0] == dict(ours.native) and len(turns[1]["content"]) == 3
    assert engine.memory.history[0].reasoning == (ours, theirs)
    assert fold([e.fact for e in engine.trace()]).history == engine.memory.history


def test_a_refused_call_keeps_the_reasoning_of_its_response() -> None:
    thought = part("use the forbidden tool")
    llm = MockLlmCaller(
        [
            LlmResponse(calls=(ToolCall(name="rm", id="c1"),), reasoning=(thought,)),
            LlmResponse.final_answer("An answer that is long enough."),
        ]
    )
    engine = (
        AgentBuilder("t")
        .llm(llm)
        .tool("rm", "", {"type": "object"}, lambda a: "gone")
        .blacklist_tool("rm")
        .build()
    )
    engine.run()
    said = llm.calls[1].memory.build_messages()[1]
    assert said["reasoning"][0]["native"]["thinking"] == "use the forbidden tool"


def test_without_reasoning_facts_and_digests_are_written_as_before() -> None:
    response = LlmResponse.tool_call("lookup", {"q": 1}, id="c1")
    assert "reasoning" not in f.FACTS.encode(f.LlmResponded(purpose="plan", response=response))
    entry = HistoryEntry(step=1, tool=ToolCall(name="x", id="c"), observation="o", success=True)
    assert entry.model_dump(mode="json") == {
        "step": 1,
        "tool": {"name": "x", "args": {}, "id": "c"},
        "observation": "o",
        "success": True,
        "text": None,
    }
    with_thought = entry.model_copy(update={"reasoning": (part("hm"),)})
    assert "reasoning" in with_thought.model_dump(mode="json")
    plain = AgentMemory(task="t", history=History((entry,))).build_messages()
    assert "reasoning" not in plain[2]


# -- prompt caching ---------------------------------------------------------------------------


def test_automatic_cache_marks_the_request_as_recorded_and_counts_reads_and_writes() -> None:
    with LoopbackProvider() as server:
        first = server.serve_fixture(f"{THINKING}/10_prompt_cache_turn1_cache_read")
        server.serve_fixture(f"{THINKING}/11_prompt_cache_turn2_cache_write")
        recorded = first["request"]["json"]
        c = caller(server, cache="auto", cache_ttl="5m", default_model="claude-test")
        memory = AgentMemory(
            task=recorded["messages"][0]["content"][0]["text"], system_prompt=recorded["system"]
        )
        read = call(c, memory)
        written = call(c, memory)
    sent = server.requests[0]["json"]
    assert request_but_messages(sent) == {**request_but_messages(recorded), "model": "claude-test"}
    assert sent["messages"] == recorded["messages"]
    assert read.usage is not None and written.usage is not None
    assert (read.usage.input_tokens, read.usage.cache_read_tokens) == (3, 1111)
    assert read.usage.cache_write_tokens == 0
    assert (written.usage.cache_read_tokens, written.usage.cache_write_tokens) == (1111, 418)
    assert written.usage.total_tokens == 3 + 33  # cache tokens are counted apart
    cost = cost_of("claude-sonnet-4-5-20250929", 3, 33, 1111, 418)
    assert cost == pytest.approx((3 * 3 + 33 * 15 + 1111 * 0.3 + 418 * 3.75) / 1e6)
    assert cost_of("gpt-4o", 1_000_000, 0, 1_000_000) == pytest.approx(2.5)  # no cache price


def test_named_cache_breakpoints_mark_system_tools_and_the_last_message() -> None:
    history = (
        HistoryEntry(
            step=1,
            tool=ToolCall(name="lookup", id="c1"),
            observation="SUCCESS: found",
            success=True,
            reasoning=(part("look it up"),),
        ),
    )
    memory = AgentMemory(task="Find it.", system_prompt="Be brief.", history=History(history))
    tools = ToolRegistry()
    for name in ("lookup", "save"):
        tools.register(name, "", {"type": "object"}, lambda a: "ok")
    marker = {"type": "ephemeral"}
    c = AnthropicCaller(cache=("conversation", "system", "tools"))
    assert c.settings["cache"] == ["system", "tools", "conversation"]
    request = c._request(memory, tools, "m")
    assert "cache_control" not in request
    assert request["system"] == [{"type": "text", "text": "Be brief.", "cache_control": marker}]
    assert request["tools"][-1]["cache_control"] == marker
    assert "cache_control" not in request["tools"][0]
    last = request["messages"][-1]["content"]
    assert last[-1]["type"] == "tool_result" and last[-1]["cache_control"] == marker
    thought = request["messages"][1]["content"][0]
    assert thought["type"] == "thinking" and "cache_control" not in thought
    assert memory.history[0].reasoning[0].native.get("cache_control") is None  # not changed
    only = AnthropicCaller(cache="tools")._request(memory, tools, "m")
    assert isinstance(only["system"], str) and only["tools"][-1]["cache_control"] == marker
    assert "cache" not in AnthropicCaller(cache="off").settings


def test_stats_and_show_count_cache_tokens_and_show_thinking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        server.serve_fixture(f"{THINKING}/11_prompt_cache_turn2_cache_write")
        engine = (
            AgentBuilder("Explain Python.")
            .llm(caller(server, cache="auto"))
            .model("claude-sonnet-4-0")
            .store(db)
            .build()
        )
        engine.run()
    with SQLiteEventStore(db) as store:
        summary = store.run(engine.run_id).summary
    assert summary.cost == cost_of("claude-sonnet-4-0", 3, 33, 1111, 418)
    assert main(["stats", "--db", str(db), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (figures["cache_read_tokens"], figures["cache_write_tokens"]) == (1111, 418)
    assert main(["stats", "--db", str(db)]) == 0
    assert "cache read 1111, written 418" in capsys.readouterr().out
    assert main(["show", engine.run_id, "--db", str(db)]) == 0
    assert "(cache read 1111, written 418)" in capsys.readouterr().out


def test_memory_messages_show_the_reasoning_sent_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        server.serve_fixture(f"{THINKING}/03_thinking_tool_use_turn1")
        server.serve_fixture(f"{THINKING}/04_thinking_tool_use_turn2_thinking_sent_back")
        engine = tool_agent(server, "plain", db).build()
        engine.run()
    assert main(["memory", engine.run_id, "--db", str(db), "--messages"]) == 0
    out = capsys.readouterr().out
    assert "(thinking, anthropic) The user is asking about the largest city" in out
    assert main(["memory", engine.run_id, "--db", str(db), "--messages", "--json"]) == 0
    sent = json.loads(capsys.readouterr().out)
    assert sent[1]["reasoning"][0]["native"]["signature"].startswith("EqEECkYICxgCKkAo")
    assert main(["show", engine.run_id, "--db", str(db)]) == 0
    assert "thought 'The user is asking" in capsys.readouterr().out
