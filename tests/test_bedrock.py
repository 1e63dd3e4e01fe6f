"""BedrockCaller through boto3 on recorded real Converse / ConverseStream traffic served on
127.0.0.1: what boto3 sent (second turns included) and what came back, streamed or not, and
runs recorded through it replayed identical offline."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentMemory,
    History,
    HistoryEntry,
    LlmDeadlineExceeded,
    LlmResponse,
    ReasoningDelta,
    TextDelta,
    TextRetracted,
    ToolCall,
    ToolRegistry,
)
from agentsm import facts as f
from agentsm.llm import RetryPolicy
from agentsm.llm.bedrock import BedrockCaller
from replay import replay_run

from .aws import EVENT_STREAM, aws_env, caller, event_stream, meaningful, recorded_frames, sent
from .loopback import LoopbackProvider, fixture

__all__ = ["aws_env"]
pytestmark = pytest.mark.usefixtures("aws_env")

NOVA = "us.amazon.nova-micro-v1:0"
CLAUDE = "us.anthropic.claude-sonnet-4-20250514-v1:0"


def call(c: BedrockCaller, memory: AgentMemory, model: str = NOVA) -> LlmResponse:
    return asyncio.run(c.call(memory, ToolRegistry(), model))


def streamed(engine: Any) -> list[Any]:
    async def collect() -> list[Any]:
        return [o async for o in engine.stream()]

    return asyncio.run(collect())


def test_a_text_turn_sends_what_was_recorded_and_reads_text_and_usage() -> None:
    with LoopbackProvider() as server:
        recorded = server.serve_fixture("bedrock/01_text_nonstream")
        response = call(
            caller(server), AgentMemory(task="Hello!", system_prompt="You are a chatbot.")
        )
    request = server.requests[0]
    assert request["path"] == recorded["request"]["path"]  # the model id URL-encoded
    assert request["json"] == meaningful(recorded["request"]["json"])
    assert request["headers"]["amz-sdk-request"] == "attempt=1; max=1"  # boto3 retries off
    body = json.loads(recorded["response"]["body"])
    assert response.content == body["output"]["message"]["content"][0]["text"]
    assert response.stop_reason == "end_turn" and response.calls == ()
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (7, 30)


# -- an agent that uses tools, turn by turn, then replayed offline --------------------------

TOOL_TURNS: dict[str, dict[str, Any]] = {
    "plain, failed tool": {
        "turns": ("02_tool_use_turn1", "03_tool_result_error_turn2_final_text"),
        "options": {"temperature": 0.0, "tool_choice": "auto"},
        "results": {"get_capital": None},  # raises: the result goes back with status "error"
    },
    "parallel": {
        "turns": ("04_parallel_tool_use_turn1", "05_parallel_tool_results_turn2_final_text"),
        "options": {},
        "results": {"get_current_weather": "weather"},
    },
    "streamed": {
        "turns": ("07_stream_tool_use_turn1", "08_stream_turn2_final_text"),
        "options": {"top_p": 0.5, "stream": True},
        "results": {"get_temperature": "30°C", "get_capital": "Paris"},
    },
}


def tool_agent(server: LoopbackProvider, shape: str, db: Path) -> AgentBuilder:
    turns = TOOL_TURNS[shape]
    first = fixture(f"bedrock/{turns['turns'][0]}")["request"]
    recorded = first["json"]
    builder = (
        AgentBuilder(recorded["messages"][0]["content"][0]["text"])
        .llm(caller(server, **turns["options"]))
        .model(first["path"].split("/")[2].replace("%3A", ":"))
        .store(db)
    )
    if recorded.get("system"):
        builder.system_prompt(recorded["system"][0]["text"])
    for spec in (t["toolSpec"] for t in recorded["toolConfig"]["tools"]):
        result = turns["results"][spec["name"]]

        def run(args: dict[str, Any], result: Any = result) -> Any:
            if result is None:
                raise ValueError("The country is not supported.")
            return result

        builder.tool(spec["name"], spec["description"], spec["inputSchema"]["json"], run)
    return builder


@pytest.mark.parametrize("shape", sorted(TOOL_TURNS))
def test_tool_turns_send_tool_results_as_recorded_and_replay_identical(
    shape: str, tmp_path: Path
) -> None:
    first, second = (f"bedrock/{name}" for name in TOOL_TURNS[shape]["turns"])
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        turn1, turn2 = server.serve_fixture(first), server.serve_fixture(second)
        engine = tool_agent(server, shape, db).build()
        outputs = streamed(engine)
        assert replay_run(db, engine.run_id, lambda task: tool_agent(server, shape, db)).identical
        assert len(server.requests) == 2  # the replay asked the server nothing
    # the first turn as recorded; the second sends the model's turn back unchanged
    assert [r["path"] for r in server.requests] == [
        turn1["request"]["path"],
        turn2["request"]["path"],
    ]
    assert sent(server, 0) == meaningful(turn1["request"]["json"])
    again, recorded = sent(server, 1), turn2["request"]["json"]
    assert {k: v for k, v in again.items() if k != "messages"} == {
        k: v for k, v in meaningful(recorded).items() if k != "messages"
    }
    assert again["messages"][:2] == recorded["messages"][:2]
    # every result of the turn in one user message, in call order, the failed one marked
    results = [b["toolResult"] for b in again["messages"][2]["content"]]
    assert len(again["messages"]) == 3 and len(results) == len(recorded["messages"][2]["content"])
    recorded_ids = [b["toolResult"]["toolUseId"] for b in recorded["messages"][2]["content"]]
    assert [r["toolUseId"] for r in results] == recorded_ids
    statuses = [
        b["toolResult"].get("status", "success") for b in recorded["messages"][2]["content"]
    ]
    assert [r["status"] for r in results] == statuses
    for result, entry in zip(results, engine.memory.history, strict=True):
        assert result["content"] == [{"text": entry.observation}]
    # what came back
    answer = json.loads(turn2["response"]["body"]) if shape != "streamed" else None
    if answer is not None:
        assert engine.memory.final_answer == answer["output"]["message"]["content"][0]["text"]
    else:
        shown = "".join(o.text for o in outputs if isinstance(o, TextDelta))
        assert engine.memory.final_answer and shown.endswith(engine.memory.final_answer)
    assert engine.memory.total_usage.input_tokens > 0


def test_reasoning_content_is_recorded_and_sent_back_unchanged_first_in_its_turn() -> None:
    with LoopbackProvider() as server:
        turn1 = server.serve_fixture("bedrock/09_reasoning_content_turn1")
        turn2 = server.serve_fixture("bedrock/10_reasoning_content_turn2_sent_back")
        c = caller(server, thinking="low")
        response = call(c, AgentMemory(task="How do I cross the street?"), CLAUDE)
        came = json.loads(turn1["response"]["body"])["output"]["message"]["content"]
        (part,) = response.reasoning
        assert part.kind == "thinking" and part.provider == "bedrock"
        assert dict(part.native) == came[0]  # the whole block, signature included
        assert part.text == came[0]["reasoningContent"]["reasoningText"]["text"]
        assert response.content == came[1]["text"]
        entry = HistoryEntry(
            step=1,
            tool=ToolCall(name="lookup", id="tooluse_1"),
            observation="SUCCESS: found",
            success=True,
            text=response.content,
            reasoning=response.reasoning,
        )
        memory = AgentMemory(task="How do I cross the street?", history=History((entry,)))
        again = call(c, memory, CLAUDE)
    first, second = sent(server, 0), sent(server, 1)
    assert server.requests[0]["path"] == turn1["request"]["path"]
    assert first == meaningful(turn1["request"]["json"])
    recorded = turn2["request"]["json"]
    assert second["additionalModelRequestFields"] == recorded["additionalModelRequestFields"]
    assert second["messages"][1]["content"][:2] == recorded["messages"][1]["content"]
    assert second["messages"][1]["content"][2]["toolUse"]["toolUseId"] == "tooluse_1"
    assert [p.text[:20] for p in again.reasoning] == ["The human is asking "]
    usage = again.usage
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (334, 432)


def test_redacted_reasoning_goes_back_as_the_bytes_it_came_as() -> None:
    secret = base64.b64encode(b"\x00opaque reasoning\xff").decode()
    redacted = {"reasoningContent": {"redactedContent": secret}}
    body: dict[str, Any] = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    redacted,
                    {"toolUse": {"toolUseId": "tooluse_r", "name": "lookup", "input": {}}},
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 5, "outputTokens": 6, "totalTokens": 11},
    }
    with LoopbackProvider() as server:
        server.serve(200, body)
        server.serve_fixture("bedrock/01_text_nonstream")
        c = caller(server, thinking="low")
        response = call(c, AgentMemory(task="t"), CLAUDE)
        (part,) = response.reasoning
        assert part.kind == "redacted" and part.text == ""
        assert dict(part.native) == {"reasoningContent": {"redactedContent": secret}}
        entry = HistoryEntry(
            step=1, tool=response.calls[0], observation="ok", success=True, reasoning=(part,)
        )
        call(c, AgentMemory(task="t", history=History((entry,))), CLAUDE)
    assert sent(server, 1)["messages"][1]["content"][0] == redacted


# -- streaming --------------------------------------------------------------------------------


def test_a_streamed_text_turn_arrives_as_deltas_without_a_block_start() -> None:
    recorded = fixture("bedrock/06_stream_text")
    events = recorded["response"]["eventstream_decoded"]
    assert recorded_frames(recorded) == base64.b64decode(recorded["response"]["body"])
    assert not any(e["headers"][":event-type"] == "contentBlockStart" for e in events)
    with LoopbackProvider() as server:
        server.serve_fixture("bedrock/06_stream_text")
        engine = (
            AgentBuilder("What is the capital of France?")
            .system_prompt("You are a helpful chatbot.")
            .llm(caller(server, stream=True, temperature=0.0))
            .model(NOVA)
            .build()
        )
        outputs = streamed(engine)
    assert server.requests[0]["path"].endswith("/converse-stream")
    assert sent(server, 0) == meaningful(recorded["request"]["json"])
    deltas = [o.text for o in outputs if isinstance(o, TextDelta)]
    said = [e["payload"]["delta"]["text"] for e in events if "delta" in e["payload"]]
    assert deltas == said and engine.memory.final_answer == "".join(said)
    assert engine.memory.total_usage.output_tokens == 82


STREAMED_REASONING = (
    ("messageStart", {"role": "assistant", "p": "abc"}),
    (
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Think of "}}, "p": "a"},
    ),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "it."}}}),
    (
        "contentBlockDelta",
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "c2lnbmF0dXJl"}}},
    ),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Look left and right, "}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "then cross."}}),
    ("contentBlockStop", {"contentBlockIndex": 1}),
    ("messageStop", {"stopReason": "end_turn", "p": "abcdef"}),
    (
        "metadata",
        {
            "usage": {
                "inputTokens": 40,
                "outputTokens": 20,
                "totalTokens": 60,
                "cacheReadInputTokens": 1200,
                "cacheWriteInputTokens": 30,
            },
            "metrics": {"latencyMs": 100},
        },
    ),
)


def test_streamed_reasoning_arrives_as_reasoning_deltas_and_keeps_its_signature() -> None:
    with LoopbackProvider() as server:
        server.serve(200, event_stream(*STREAMED_REASONING), EVENT_STREAM)
        engine = (
            AgentBuilder("How do I cross the street?")
            .llm(caller(server, stream=True, thinking="low"))
            .model(CLAUDE)
            .build()
        )
        outputs = streamed(engine)
    assert sent(server, 0)["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 1024}
    }
    said = [o for o in outputs if isinstance(o, ReasoningDelta | TextDelta)]
    assert [type(o).__name__ for o in said] == ["ReasoningDelta"] * 2 + ["TextDelta"] * 2
    fact = next(e.fact for e in engine.trace() if e.event == "LlmResponded")
    assert isinstance(fact, f.LlmResponded)
    (part,) = fact.response.reasoning
    assert dict(part.native) == {
        "reasoningContent": {"reasoningText": {"text": "Think of it.", "signature": "c2lnbmF0dXJl"}}
    }
    usage = fact.response.usage
    assert usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (40, 1200, 30)
    assert engine.memory.final_answer == "Look left and right, then cross."


def test_a_stream_cut_mid_answer_is_retracted_and_retried() -> None:
    async def no_wait(seconds: float) -> None:
        pass

    recorded = base64.b64decode(fixture("bedrock/06_stream_text")["response"]["body"])
    with LoopbackProvider() as server:
        server.serve_fixture("bedrock/06_stream_text", cut_after=len(recorded) // 2)
        server.serve_fixture("bedrock/06_stream_text")
        c = caller(server, stream=True, retry=RetryPolicy(max_retries=1, sleep=no_wait))
        engine = AgentBuilder("What is the capital of France?").llm(c).model(NOVA).build()
        outputs = streamed(engine)
    (retracted,) = [o for o in outputs if isinstance(o, TextRetracted)]
    assert retracted.text.startswith("The capital of France is Paris.")
    assert "ended the stream before its messageStop event" in retracted.reason
    after = outputs[outputs.index(retracted) :]
    assert "".join(o.text for o in after if isinstance(o, TextDelta)) == engine.memory.final_answer
    assert len(server.requests) == 2


def test_an_error_event_mid_stream_is_classified_and_retried() -> None:
    async def no_wait(seconds: float) -> None:
        pass

    stream = event_stream(STREAMED_REASONING[0], STREAMED_REASONING[5])
    from .aws import frame

    stream += frame("throttlingException", {"message": "Too many requests"}, "exception")
    with LoopbackProvider() as server:
        server.serve(200, stream, EVENT_STREAM)
        server.serve_fixture("bedrock/06_stream_text")
        c = caller(server, stream=True, retry=RetryPolicy(max_retries=1, sleep=no_wait))
        engine = AgentBuilder("What is the capital of France?").llm(c).model(NOVA).build()
        outputs = streamed(engine)
    (retracted,) = [o for o in outputs if isinstance(o, TextRetracted)]
    assert retracted.text == "Look left and right, " and "rate limit" in retracted.reason
    assert (engine.memory.final_answer or "").startswith("The capital of France is Paris.")


def test_one_caller_serves_several_event_loops_and_concurrent_calls() -> None:
    with LoopbackProvider() as server:
        for _ in range(4):
            server.serve_fixture("bedrock/01_text_nonstream")
        c = caller(server)
        assert call(c, AgentMemory(task="one")).content
        assert call(c, AgentMemory(task="two")).content  # a new loop, a new client

        async def both() -> list[LlmResponse]:
            memories = [AgentMemory(task="three"), AgentMemory(task="four")]
            answers = await asyncio.gather(*(c.call(m, ToolRegistry(), NOVA) for m in memories))
            await c.aclose()
            return list(answers)

        assert all(r.content for r in asyncio.run(both()))
    assert len(c._clients) == 0
    assert {r["json"]["messages"][0]["content"][0]["text"] for r in server.requests} == {
        "one",
        "two",
        "three",
        "four",
    }


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_abandoned_at_its_deadline_keeps_nothing_waiting(stream: bool) -> None:
    text = "bedrock/06_stream_text" if stream else "bedrock/01_text_nonstream"
    with LoopbackProvider() as server:
        server.serve_fixture(text)
        server.hang()
        c = caller(server, stream=stream)
        quick = AgentConfig(min_answer_length=1, llm_deadline=0.5)
        engine = AgentBuilder("Hello!").llm(c).model(NOVA).config(quick).build()

        async def warm_then_abandon() -> None:
            await c.call(AgentMemory(task="warm"), ToolRegistry(), NOVA)  # the loop's client
            with pytest.raises(LlmDeadlineExceeded):
                await engine.arun()

        began = time.monotonic()
        asyncio.run(warm_then_abandon())  # the loop closes without waiting for boto3's thread
        assert time.monotonic() - began < 5
        while len(server.requests) < 2 and time.monotonic() - began < 10:
            time.sleep(0.01)
        assert len(server.requests) == 2  # the abandoned request reached the server
        server.serve_fixture(text)
        assert call(c, AgentMemory(task="Hello!")).content  # the caller goes on
