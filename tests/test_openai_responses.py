"""OpenAiResponsesCaller through the official openai SDK, on recorded real Responses API traffic
served on 127.0.0.1: what came back, and what the SDK sent on the next turn (reasoning items
and the items that followed them, function_call_output items)."""

from __future__ import annotations

import asyncio
import json
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
    ReasoningDelta,
    ReasoningPart,
    TextDelta,
    TextRetracted,
    ToolCall,
    ToolRegistry,
)
from agentsm import facts as f
from agentsm.llm import BadRequest, OpenAiResponsesCaller, RateLimited, RetryPolicy
from agentsm.llm.openai_responses import FOLLOWED_BY
from agentsm.trace import summarize
from replay import replay_run

from .loopback import LoopbackProvider, fixture

KEY = "sk-test-0123456789abcdef"
SSE = {"content-type": "text/event-stream; charset=utf-8"}
HERE = "openai_responses"


def caller(server: LoopbackProvider, **kwargs: Any) -> OpenAiResponsesCaller:
    async def no_wait(seconds: float) -> None:
        pass

    policy = RetryPolicy(max_retries=kwargs.pop("max_retries", 0), sleep=no_wait)
    return OpenAiResponsesCaller(base_url=server.url + "/v1", api_key=KEY, retry=policy, **kwargs)


def recorded_output(name: str) -> list[dict[str, Any]]:
    """The output items of a recorded (non-streamed) response."""
    return json.loads(fixture(f"{HERE}/{name}")["response"]["body"])["output"]  # type: ignore[no-any-return]


def agent(
    server: LoopbackProvider, first: str, result: str, db: Path | None = None, **options: Any
) -> AgentBuilder:
    """The agent of a recorded conversation: its task, instructions, model and one tool."""
    request = fixture(f"{HERE}/{first}")["request"]["json"]
    tool = request["tools"][0]
    builder = (
        AgentBuilder(request["input"][0]["content"])
        .llm(caller(server, **options))
        .model(request["model"])
        .tool(tool["name"], tool["description"] or "", tool["parameters"], lambda a: result)
        .config(AgentConfig(min_answer_length=1))
    )
    if request.get("instructions"):
        builder.system_prompt(request["instructions"])
    if db is not None:
        builder.store(db)
    return builder


def stream_outputs(engine: AgentEngine) -> list[Any]:
    async def collect() -> list[Any]:
        return [o async for o in engine.stream()]

    return asyncio.run(collect())


def but(request: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k not in names}


def test_a_text_answer_and_what_was_sent() -> None:
    with LoopbackProvider() as server:
        recorded = server.serve_fixture(f"{HERE}/01_text_nonstream")
        c = caller(server)
        response = asyncio.run(
            c.call(AgentMemory(task="What is the capital of France?"), ToolRegistry(), "gpt-4o")
        )
    sent = server.requests[0]
    assert sent["path"] == "/v1/responses"
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    assert but(sent["json"], "store", "include") == but(recorded["request"]["json"], "stream")
    assert sent["json"]["store"] is False
    assert sent["json"]["include"] == ["reasoning.encrypted_content"]
    assert response.is_final and response.content == "The capital of France is Paris."
    assert response.model == "gpt-4o-2024-08-06" and response.stop_reason == "completed"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (14, 8)
    assert response.reasoning == ()


def test_a_function_call_turn_then_its_output_item(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        server.serve_fixture(f"{HERE}/02_function_call_turn1")
        turn2 = server.serve_fixture(f"{HERE}/03_function_call_turn2_final_text")
        engine = agent(server, "02_function_call_turn1", "Potato City", db).build()
        answer = engine.run()
    assert answer == "The capital of PotatoLand is Potato City."
    sent, recorded = server.requests[1]["json"]["input"], turn2["request"]["json"]["input"]
    assert [i.get("type", "message") for i in sent] == [i.get("type", "message") for i in recorded]
    call, output = sent[1], sent[2]
    assert call["call_id"] == recorded[1]["call_id"] and call["name"] == "get_capital"
    assert json.loads(call["arguments"]) == json.loads(recorded[1]["arguments"])
    assert "id" not in call  # no reasoning to pair it with: the item id is not needed
    assert output == {**recorded[2], "output": "SUCCESS: Potato City"}
    tools = server.requests[0]["json"]["tools"]
    assert [(t["type"], t["name"], t["parameters"]) for t in tools] == [
        (t["type"], t["name"], t["parameters"]) for t in turn2["request"]["json"]["tools"]
    ]
    assert engine.memory.history[0].tool.id == "call_YfwRsW8sUxDKipwyhWTzOXCA"
    assert replay_run(db, engine.run_id).identical


def test_parallel_calls_go_back_as_several_items_then_several_outputs() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture(f"{HERE}/04_parallel_function_calls_turn1")
        turn2 = server.serve_fixture(f"{HERE}/05_parallel_function_calls_turn2_final_text")
        engine = agent(server, "04_parallel_function_calls_turn1", "51, 0").build()
        answer = engine.run()
    assert answer.startswith("It seems")
    kinds = [e.fact.event for e in engine.trace() if isinstance(e.fact, f.Transitioned)]
    assert "LlmParallelToolCalls" in kinds
    sent = [i for i in server.requests[1]["json"]["input"] if "type" in i]
    recorded = [i for i in turn2["request"]["json"]["input"] if "type" in i]
    assert [(i["type"], i["call_id"]) for i in sent] == [
        (i["type"], i["call_id"]) for i in recorded
    ]
    assert [json.loads(i["arguments"]) for i in sent[:2]] == [
        json.loads(i["arguments"]) for i in recorded[:2]
    ]


def reasoning_agent(server: LoopbackProvider, db: Path) -> AgentBuilder:
    first = "06_reasoning_function_call_turn1"
    thinking = fixture(f"{HERE}/{first}")["request"]["json"]["reasoning"]
    return agent(server, first, "plan updated", db, thinking=thinking)


def test_reasoning_items_go_back_whole_and_in_order_before_their_calls(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with LoopbackProvider() as server:
        turn1 = server.serve_fixture(f"{HERE}/06_reasoning_function_call_turn1")
        turn2 = server.serve_fixture(f"{HERE}/07_reasoning_function_call_turn2_reasoning_sent_back")
        engine = reasoning_agent(server, db).build()
        engine.run()
    # what the SDK sent: the settings as recorded (store=False added), then the turn as it came
    for sent, interaction in zip(server.requests, (turn1, turn2), strict=True):
        recorded = interaction["request"]["json"]
        assert but(sent["json"], "input", "tools", "store") == but(
            recorded, "input", "tools", "stream", "tool_choice"
        )
    sent, recorded = server.requests[1]["json"]["input"], turn2["request"]["json"]["input"]
    assert sent[:3] == recorded[:3]  # task, reasoning item (encrypted), function_call with its id
    assert sent[1]["encrypted_content"].startswith("gAAAAAB") and sent[2]["id"].startswith("fc_")
    assert sent[3] == {**recorded[3], "output": "SUCCESS: plan updated"}
    # what came back: the reasoning item recorded whole, its summary shown
    came = recorded_output("06_reasoning_function_call_turn1")
    (part,) = engine.memory.history[0].reasoning
    assert part.kind == "summary" and part.provider == "openai-responses"
    assert part.text.startswith("**Creating a structured poem**")
    assert part.text.count("\n\n**") == len(came[0]["summary"]) - 1
    native = dict(part.native)
    assert native.pop(FOLLOWED_BY) == came[1:]
    assert native == came[0]
    usage = engine.memory.total_usage
    assert (usage.reasoning_tokens, usage.cache_read_tokens) == (1792, 2048)
    lines = [summarize(e.fact) for e in engine.trace() if e.event == "LlmResponded"]
    assert lines[0].startswith("thought '**Creating a structured poem**")
    assert replay_run(db, engine.run_id).identical
    assert replay_run(db, engine.run_id, lambda task: reasoning_agent(server, db)).identical


def test_a_streamed_call_then_streamed_text_march_2025_events() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture(f"{HERE}/08_stream_function_call_turn1")
        turn2 = server.serve_fixture(f"{HERE}/09_stream_text_turn2")
        engine = agent(server, "08_stream_function_call_turn1", "Paris", stream=True).build()
        outputs = stream_outputs(engine)
    deltas = [o.text for o in outputs if isinstance(o, TextDelta)]
    assert "".join(deltas) == engine.memory.final_answer == "The capital of France is Paris."
    assert len(deltas) == 7
    first = engine.trace()
    call = next(e.fact for e in first if e.event == "LlmResponded")
    assert isinstance(call, f.LlmResponded)
    assert call.response.calls[0].id == "call_kL0PCQV7M2WMoVX8V8OtYSAL"  # the call_id
    assert call.response.calls[0].args == {"country": "France"}
    assert call.response.usage is not None and call.response.usage.input_tokens == 255
    sent = server.requests[1]["json"]
    assert sent["stream"] is True and turn2["request"]["json"]["instructions"] == ""
    assert "instructions" not in sent  # no system prompt, none sent
    assert [i.get("type") for i in sent["input"]] == [None, "function_call", "function_call_output"]


def test_streamed_reasoning_text_and_call_go_back_as_they_came_newer_events(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = "10_stream_reasoning_text_function_call_turn1"
    with LoopbackProvider() as server:
        turn1 = server.serve_fixture(f"{HERE}/{first}")
        turn2 = server.serve_fixture(f"{HERE}/11_stream_turn2_reasoning_sent_back")
        engine = agent(server, first, "Potato City", db, stream=True).build()
        outputs = stream_outputs(engine)
    events = [
        json.loads(line[6:])
        for line in turn1["response"]["body"].splitlines()
        if line.startswith("data: ")
    ]
    assert all("sequence_number" in e for e in events)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert "encrypted_content" in done[0]  # only the done event has it whole
    sent, recorded = server.requests[1]["json"]["input"], turn2["request"]["json"]["input"]
    assert [i.get("type") for i in sent] == [i.get("type") for i in recorded]
    assert sent[1] == done[0] and sent[1] == {**recorded[1], "content": []}  # as returned
    assert sent[1]["encrypted_content"] == recorded[1]["encrypted_content"]
    message = sent[2]
    assert but(message, "content") == but(recorded[2], "content")  # id, phase, status, role
    assert message == done[1]  # the commentary message as it came, not sent twice as text
    assert sent[3] == recorded[3]  # the function_call with its id and arguments
    assert sent[4] == {**recorded[4], "output": "SUCCESS: Potato City"}
    said = "".join(o.text for o in outputs if isinstance(o, TextDelta))
    assert said.startswith(engine.memory.history[0].text or "-")
    assert said.endswith(engine.memory.final_answer or "-")
    (part,) = engine.memory.history[0].reasoning
    assert part.kind == "redacted" and part.text == ""
    assert engine.memory.total_usage.reasoning_tokens == 26
    assert replay_run(db, engine.run_id).identical


def test_reasoning_summaries_stream_as_reasoning_deltas() -> None:
    """The summary deltas of a stream built from the recorded reasoning response (06)."""
    came = recorded_output("06_reasoning_function_call_turn1")
    reasoning, call = came
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5", "output": []}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**reasoning, "summary": []},
        },
    ]
    for index, summary in enumerate(reasoning["summary"]):
        events.append(
            {
                "type": "response.reasoning_summary_part.added",
                "output_index": 0,
                "summary_index": index,
                "item_id": reasoning["id"],
                "part": {"type": "summary_text", "text": ""},
            }
        )
        for start in range(0, len(summary["text"]), 40):
            events.append(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "output_index": 0,
                    "summary_index": index,
                    "item_id": reasoning["id"],
                    "delta": summary["text"][start : start + 40],
                }
            )
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {"type": "response.completed", "response": {"id": "resp_1", "model": "gpt-5",
         "status": "completed", "output": []}},
    ]  # fmt: skip
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    with LoopbackProvider() as server:
        server.serve(200, body, SSE)
        server.serve_fixture(f"{HERE}/07_reasoning_function_call_turn2_reasoning_sent_back")
        engine = agent(server, "06_reasoning_function_call_turn1", "ok", stream=True).build()
        outputs = stream_outputs(engine)
    shown = [o for o in outputs if isinstance(o, ReasoningDelta)]
    assert {o.kind for o in shown} == {"summary"}
    assert "".join(o.text for o in shown) == engine.memory.history[0].reasoning[0].text
    assert server.requests[1]["json"]["input"][1] == reasoning


def test_a_refused_request_is_a_bad_request_and_not_retried() -> None:
    with LoopbackProvider() as server:
        server.serve_fixture(f"{HERE}/12_error_400_invalid_temperature")
        c = caller(server, stream=True, temperature=-1, max_retries=2)
        with pytest.raises(BadRequest, match="Invalid 'temperature'") as caught:
            asyncio.run(c.call(AgentMemory(task="t"), ToolRegistry(), "gpt-4o"))
    assert caught.value.status == 400 and len(server.requests) == 1
    assert KEY not in str(caught.value)
    assert server.requests[0]["json"]["temperature"] == -1


def test_errors_reported_inside_a_response_are_classified() -> None:
    refused: dict[str, Any] = {"id": "resp_1", "status": "failed", "output": []}
    limited = {**refused, "error": {"code": "rate_limit_exceeded", "message": f"slow down {KEY}"}}
    failed = {"type": "response.failed", "response": limited}
    with LoopbackProvider() as server:
        server.serve(200, f"event: response.failed\ndata: {json.dumps(failed)}\n\n", SSE)
        server.serve_fixture(f"{HERE}/09_stream_text_turn2")
        response = asyncio.run(
            caller(server, stream=True, max_retries=1).call(
                AgentMemory(task="t"), ToolRegistry(), "m"
            )
        )
        assert response.content == "The capital of France is Paris."  # retried
        server.serve(200, {**refused, "error": {"code": "invalid_prompt", "message": "no"}})
        with pytest.raises(BadRequest, match="failed the response \\(invalid_prompt\\)"):
            asyncio.run(caller(server).call(AgentMemory(task="t"), ToolRegistry(), "m"))
        server.serve(200, 'event: error\ndata: {"type": "error", "code": "rate_limit_exceeded", '
                     '"message": "later"}\n\n', SSE)  # fmt: skip
        with pytest.raises(RateLimited, match="later"):
            asyncio.run(
                caller(server, stream=True).call(AgentMemory(task="t"), ToolRegistry(), "m")
            )


def test_a_cut_stream_is_retracted_and_retried() -> None:
    name = f"{HERE}/09_stream_text_turn2"
    with LoopbackProvider() as server:
        server.serve_fixture(name, cut_after=len(fixture(name)["response"]["body"]) - 900)
        server.serve_fixture(name)
        engine = (
            AgentBuilder("What is the capital of France?")
            .llm(caller(server, stream=True, max_retries=1))
            .config(AgentConfig(min_answer_length=1))
            .build()
        )
        outputs = stream_outputs(engine)
    (retracted,) = [o for o in outputs if isinstance(o, TextRetracted)]
    assert retracted.text and "could not be reached or dropped" in retracted.reason
    after = outputs[outputs.index(retracted) :]
    assert "".join(o.text for o in after if isinstance(o, TextDelta)) == engine.memory.final_answer


def test_one_caller_serves_many_runs_on_their_own_loops() -> None:
    with LoopbackProvider() as server:
        c = caller(server)
        answers = []
        for _ in range(3):
            server.serve_fixture(f"{HERE}/01_text_nonstream")
            builder = AgentBuilder("What is the capital of France?").llm(c)
            answers.append(builder.config(AgentConfig(min_answer_length=1)).build().run())
    assert answers == ["The capital of France is Paris."] * 3


def test_settings_thinking_and_store_reach_the_request_and_the_definition() -> None:
    memory, tools = AgentMemory(task="t", system_prompt="Be brief."), ToolRegistry()
    tools.register("lookup", "Look it up.", {"type": "object"}, lambda a: "ok")
    c = OpenAiResponsesCaller(
        thinking="high", max_tokens=500, tool_choice="lookup", parallel_tool_calls=False
    )
    request = c._request(memory, tools, "gpt-5")
    assert request["reasoning"] == {"effort": "high", "summary": "auto"}
    assert request["max_output_tokens"] == 500 and request["instructions"] == "Be brief."
    assert request["tool_choice"] == {"type": "function", "name": "lookup"}
    assert request["parallel_tool_calls"] is False and request["tools"][0]["strict"] is False
    assert (request["store"], request["include"]) == (False, ["reasoning.encrypted_content"])
    assert c.settings == {
        "provider": "OpenAI Responses",
        "tool_choice": "lookup",
        "parallel_tool_calls": False,
        "thinking": "high",
        "max_tokens": 500,
        "store": False,
    }
    stored = OpenAiResponsesCaller(store=True)._request(memory, ToolRegistry(), "m")
    assert stored["store"] is True and "include" not in stored and "tools" not in stored
    assert OpenAiResponsesCaller(include=[])._request(memory, tools, "m").get("include") is None
    assert OpenAiResponsesCaller(thinking="minimal").settings["thinking"] == "minimal"
    with pytest.raises(BuildError, match="the Responses API takes an effort"):
        OpenAiResponsesCaller(thinking=2048)
    assert "sk-" not in repr(OpenAiResponsesCaller(api_key=KEY))
    assert "api_key=set" in repr(OpenAiResponsesCaller(api_key=KEY))


def test_a_missing_key_ends_the_run_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    engine = AgentBuilder("t").llm(OpenAiResponsesCaller(max_retries=0)).build()
    with pytest.raises(AgentFailed, match="OPENAI_API_KEY is not set"):
        engine.run()


def test_a_turn_without_our_reasoning_sends_its_text_and_calls() -> None:
    """Another provider's reasoning stays home; text goes as an assistant message."""
    theirs = ReasoningPart(text="hm", provider="anthropic", native={"type": "thinking"})
    entry = HistoryEntry(
        step=1,
        tool=ToolCall(name="lookup", args={"q": "é"}, id="call_1"),
        observation="SUCCESS: ok",
        success=True,
        text="Looking.",
        reasoning=(theirs,),
    )
    memory = AgentMemory(task="t", history=History((entry,)))
    request = OpenAiResponsesCaller()._request(memory, ToolRegistry(), "m")
    assert request["input"][1:] == [
        {"role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q":"é"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "SUCCESS: ok"},
    ]
