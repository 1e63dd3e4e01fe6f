"""Threads: conversations as series of runs, one per message. Each turn starts from what the
turn before it ended with, folds, replays, exports and branches on its own; the LLM sees the
conversation; failed turns are followed; a long conversation is cut or summarised."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

import pytest

import agentsm
from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    AgentMemory,
    CustomFact,
    FinalAnswer,
    HumanInputRequired,
    LlmResponse,
    RunContext,
    State,
    Thread,
    ThreadBusy,
    ThreadTurn,
)
from agentsm import facts as f
from agentsm.llm.anthropic import anthropic_messages
from agentsm.llm.openai import openai_messages
from agentsm.memory import fold
from agentsm.states import PlanningState
from agentsm.threads import thread_runs, threads
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import branch_thread, export_run, import_runs, replay_run, replay_thread

from .loopback import LoopbackProvider
from .thread_agent import ConversationLlm, make_agent

ROOT = Path(__file__).resolve().parent.parent


def agent(store: SQLiteEventStore | str | Path, llm: Any = None) -> AgentBuilder:
    return make_agent("chat").llm(llm or ConversationLlm()).store(store)


def user_messages(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


def test_a_ten_turn_conversation_shows_the_llm_every_earlier_turn(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    llm = ConversationLlm()
    thread = agent(db, llm).thread()
    said = [f"message {n}" if n % 3 else f"look up city {n}" for n in range(1, 11)]
    answers = [thread.send(text) for text in said]
    assert answers[9] == f"Answer 10 to 'message 10'; earlier: {' / '.join(said[:9])}"
    assert len(thread.runs) == 10 and thread.runs[0] == f"{thread.id}-1"
    last = llm.seen[-1]  # system, then each turn (its tool turn too), then the new message
    assert last[0] == {"role": "system", "content": "You are a helpful assistant."}
    assert user_messages(last) == said
    assert [m["role"] for m in last[1:5]] == ["user", "assistant", "user", "assistant"]
    assert last[2] == {"role": "assistant", "content": answers[0]}
    tool_turn = last[5:9]  # turn 3: look up, its call and result, its answer
    assert tool_turn[1]["tool_calls"][0]["name"] == "lookup"
    assert tool_turn[2]["content"] == "SUCCESS: city 3: 21 C, sunny"
    assert tool_turn[3] == {"role": "assistant", "content": answers[2]}
    messages = thread.messages()
    assert [m["content"] for m in messages] == [
        x for pair in zip(said, answers, strict=True) for x in pair
    ]
    assert [m["turn"] for m in messages[:4]] == [1, 1, 2, 2]
    assert repr(thread) == f"Thread({thread.id!r}, turns=10, last='{thread.id}-10')"
    store = SQLiteEventStore(db, create=False, read_only=True)
    record = store.run(thread.runs[4])
    assert (record.parent_id, record.info["thread"]["turn"]) == (thread.runs[3], 5)
    definition = Trace.load(store, thread.runs[4]).facts()[0]
    assert isinstance(definition, f.RunStarted) and definition.thread == ThreadTurn(
        id=thread.id,
        turn=5,
        previous=thread.runs[3],
        previous_seq=store.run(thread.runs[3]).last_seq,
    )
    result = replay_thread(db, thread.id)  # each turn offline, from its own log alone
    assert result.identical and len(result.reports) == 10, str(result)
    assert replay_thread(db, thread.id, make_agent).identical


def test_each_turn_folds_and_replays_alone_in_a_log_of_its_own(tmp_path: Path) -> None:
    thread = agent(tmp_path / "chat.db").thread("support-7")
    for text in ("look up Paris", "and Rome?", "thanks"):
        thread.send(text)
    store = SQLiteEventStore(tmp_path / "chat.db", create=False)
    exported = tmp_path / "turn3.jsonl"
    exported.write_text("\n".join(export_run(store, thread.runs[2])))
    alone = SQLiteEventStore(tmp_path / "alone.db")
    import_runs(alone, exported.read_text().splitlines())
    memory = fold(Trace.load(alone, "support-7-3").facts())
    assert memory.final_answer == "Answer 3 to 'thanks'; earlier: look up Paris / and Rome?"
    assert memory.carried == 5 and memory.history[0].said == "user"
    names = [e.tool.name for e in memory.history]
    assert names == ["[USER]", "lookup", "[ANSWER]", "[USER]", "[ANSWER]"]
    assert replay_run(alone, "support-7-3").identical
    assert thread_runs(alone, "support-7")[0].run_id == "support-7-3"  # its turns here


def test_a_thread_goes_on_in_another_process(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    first = agent(db).thread("t-42")
    first.send("my name is Ann")
    first.send("look up Oslo")
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.thread_agent import make_agent;"
        "t = make_agent('chat').store(sys.argv[2]).thread('t-42');"
        "print(t.send('what is my name?')); print(len(t.runs))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(ROOT), str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answer, turns = done.stdout.splitlines()
    assert answer == "Answer 3 to 'what is my name?'; earlier: my name is Ann / look up Oslo"
    assert turns == "3"
    again = agent(db).thread("t-42")  # and here once more, from the log
    assert again.runs == ("t-42-1", "t-42-2", "t-42-3")
    assert again.send("bye").startswith("Answer 4 to 'bye'")
    assert replay_thread(db, "t-42").identical


def test_a_failed_turn_is_followed_and_the_next_turn_knows_it_failed(tmp_path: Path) -> None:
    llm = ConversationLlm()
    thread = agent(tmp_path / "chat.db", llm).thread()
    thread.send("hello")
    with pytest.raises(AgentFailed, match="model is unavailable"):
        thread.send("fail")
    assert thread.send("are you back?").startswith("Answer 3 to 'are you back?'")
    failed = llm.seen[-1][4]
    assert failed["role"] == "assistant" and failed["content"].startswith(
        "(No answer: this turn failed. LLM call failed: RuntimeError: the model is unavailable"
    )
    messages = thread.messages()
    assert messages[3]["content"] is None and "unavailable" in messages[3]["error"]
    assert replay_thread(tmp_path / "chat.db", thread.id).identical


def test_a_turn_that_waits_for_a_human_takes_no_next_message(tmp_path: Path) -> None:
    thread = agent(tmp_path / "chat.db").require_approval("lookup").thread()
    with pytest.raises(HumanInputRequired):
        thread.send("look up Lima")
    with pytest.raises(ThreadBusy, match="has not ended \\(status waiting\\)") as caught:
        thread.send("hello?")
    assert caught.value.run_id == thread.runs[0] and len(thread.runs) == 1


def test_two_senders_of_one_turn_cannot_both_record_it(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    one, two = agent(db).thread("same"), agent(db).thread("same")
    one.send("first")
    with pytest.raises(ThreadBusy, match="turn 1 \\(run same-1\\) was sent meanwhile"):
        two.send("also first")
    assert agent(db).thread("same").send("second").startswith("Answer 2")


def test_stream_and_asend(tmp_path: Path) -> None:
    thread = agent(tmp_path / "chat.db").thread()

    async def talk() -> list[Any]:
        await thread.asend("hello")
        return [out async for out in thread.stream("look up Quito")]

    outputs = asyncio.run(talk())
    assert isinstance(outputs[-1], FinalAnswer)
    assert outputs[-1].content.startswith("Answer 2 to 'look up Quito'; earlier: hello")
    assert any(type(o).__name__ == "ToolStarted" for o in outputs)


class Remembered(CustomFact):
    """A word the agent keeps from each message."""

    kind: Literal["Remembered"] = "Remembered"
    word: str


class RememberingPlanning:
    name = State.Planning
    records = frozenset({"Remembered"})

    async def handle(self, ctx: RunContext) -> str:
        if ctx.memory.step == 0:
            ctx.record(Remembered(word=ctx.memory.task.split()[0]))
        return await PlanningState().handle(ctx)  # type: ignore[return-value]


def test_parts_go_on_from_turn_to_turn(tmp_path: Path) -> None:
    def build(task: str) -> AgentBuilder:
        return (
            make_agent(task)
            .store(tmp_path / "chat.db")
            .fact(Remembered, lambda words, fact: (*words, fact.word), part="words", initial=[])
            .handler(State.Planning, RememberingPlanning())
        )

    thread = build("chat").thread("words")
    for text in ("alpha one", "beta two", "gamma three"):
        thread.send(text)
    store = SQLiteEventStore(tmp_path / "chat.db", create=False)
    memory, _ = AgentMemory.rebuild(store, "words-3")
    assert memory.part("words") == ("alpha", "beta", "gamma")
    assert replay_thread(store, "words", build).identical


def test_branching_a_thread_at_turn_3_shares_the_turns_before_it(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    llm = ConversationLlm()
    thread = agent(db, llm).thread("main")
    for text in ("one", "two", "three", "four", "five"):
        thread.send(text)
    other = thread.branch(3, "other")
    assert other.runs == thread.runs[:2] and "branched_from='main'" in repr(other)
    assert other.send("THREE") == "Answer 3 to 'THREE'; earlier: one / two"
    assert other.send("FOUR") == "Answer 4 to 'FOUR'; earlier: one / two / THREE"
    assert user_messages(llm.seen[-1])[-1] == "FOUR" and "three" not in user_messages(llm.seen[-1])
    store = SQLiteEventStore(db, create=False)
    b3 = store.run("other-3")
    assert (b3.parent_id, b3.info["thread"]) == (
        "main-2",
        {
            "id": "other",
            "turn": 3,
            "previous": "main-2",
            "previous_seq": store.run("main-2").last_seq,
            "branched_from": "main",
        },
    )
    assert "branched_from" not in store.run("other-4").info["thread"]
    assert [r.run_id for r in thread_runs(store, "other")] == [
        "main-1",
        "main-2",
        "other-3",
        "other-4",
    ]
    assert [r.run_id for r in thread_runs(store, "main")] == [f"main-{n}" for n in range(1, 6)]
    listed = {t.thread_id: t for t in threads(store)}
    assert (listed["other"].turns, listed["other"].branched_from, listed["other"].branch_turn) == (
        4,
        "main",
        3,
    )
    assert agent(db).thread("other").runs == other.runs  # it goes on from the log, as any
    assert replay_thread(db, "other").identical
    made = branch_thread(db, "main", 1, "a new start", make_agent, new_thread_id="fresh")
    assert (made.thread_id, made.run_id, made.status, made.runs) == (
        "fresh",
        "fresh-1",
        "done",
        ("fresh-1",),
    )
    assert made.answer == "Answer 1 to 'a new start'; earlier: nothing"
    with pytest.raises(ValueError, match="branch it at a turn from 1 to 6, not 7"):
        thread.branch(7)


def test_a_long_conversation_is_cut_to_fit_the_context_window(tmp_path: Path) -> None:
    config = AgentConfig(min_answer_length=5, context_window=900, tool_output_max_lines=2)
    llm = ConversationLlm()

    def lookup(city: str) -> str:
        """The weather, at length."""
        return "\n".join(f"{city} forecast line {i}" for i in range(30))

    def build(task: str) -> AgentBuilder:
        return AgentBuilder(task).llm(llm).config(config).tool(lookup)

    thread = build("chat").store(tmp_path / "chat.db").thread("long")
    for n in range(12):
        thread.send(f"look up city number {n}" if n % 2 else f"tell me more about item {n}")
    store = SQLiteEventStore(tmp_path / "chat.db", create=False)
    cuts = [
        e.fact
        for run_id in thread.runs
        for e in Trace.load(store, run_id)
        if isinstance(e.fact, f.ContextCompacted)
    ]
    assert cuts and any(c.dropped for c in cuts) and any(c.truncated for c in cuts)
    last = llm.seen[-1]
    assert "earliest exchange(s) of this conversation" in last[1]["content"]
    assert user_messages(last)[-1] == "look up city number 11"
    assert "tell me more about item 0" not in user_messages(last)
    assert replay_thread(store, "long", build).identical


def test_reflection_summarises_the_earlier_turns_too(tmp_path: Path) -> None:
    config = AgentConfig(min_answer_length=5, reflect_every_n_steps=1)
    llm = ConversationLlm()

    class Summarising(ConversationLlm):
        async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
            if memory.task.startswith("Summarize the following"):
                return LlmResponse.final_answer("SUMMARY of everything said so far")
            return await llm.call(memory, tools, model)

    thread = make_agent("chat").llm(Summarising()).config(config).store(tmp_path / "c.db").thread()
    thread.send("hello")
    thread.send("look up Bern")  # a tool call: reflection after its step
    thread.send("and now?")
    store = SQLiteEventStore(tmp_path / "c.db", create=False)
    kinds = [e.event for e in Trace.load(store, thread.runs[1])]
    assert "HistoryCompressed" in kinds
    last = llm.seen[-1]
    assert [m["content"] for m in last[1:4]] == [
        "look up Bern",
        "Summary of the work so far: SUMMARY of everything said so far",
        last[3]["content"],
    ]
    assert last[3]["role"] == "assistant" and user_messages(last)[-1] == "and now?"
    assert replay_thread(store, thread.id).identical


def test_plain_runs_are_written_and_sent_as_before() -> None:
    engine = make_agent("look up Paris").build()
    engine.run()
    first = engine.store.read(engine.run_id, upto=1)[0]
    assert '"thread"' not in first.payload and '"conversation"' not in first.payload
    messages = engine.memory.build_messages()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert engine.memory.carried == 0


def turn_memory() -> AgentMemory:
    """The memory a third turn's LLM is shown: an answered turn with a tool call before it,
    then a failed turn."""
    llm = ConversationLlm()
    thread = make_agent("chat").llm(llm).thread()
    thread.send("look up Paris")
    with pytest.raises(AgentFailed):
        thread.send("fail")
    thread.send("and now?")
    return llm.memories[-1]


def test_provider_callers_send_the_conversation_with_alternating_roles() -> None:
    memory = turn_memory()
    system, turns = anthropic_messages(memory)
    assert system == "You are a helpful assistant."
    roles = [t["role"] for t in turns]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert turns[2]["content"][0]["type"] == "tool_result"
    assert turns[3]["content"] == [
        {"type": "text", "text": "Answer 1 to 'look up Paris'; earlier: nothing"}
    ]
    assert turns[6]["content"] == [{"type": "text", "text": "and now?"}]
    sent = openai_messages(memory)
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_anthropic_and_openai_are_sent_the_earlier_turns() -> None:
    from agentsm.llm import AnthropicCaller, OpenAiCaller

    def weather(location: str, units: str) -> str:
        """The weather in a city."""
        return '{"temperature": "68°F", "condition": "Sunny"}'

    with LoopbackProvider() as server:
        server.serve_fixture("anthropic/03_tool_use_single_nonstream_turn1")
        server.serve_fixture("anthropic/04_tool_use_single_nonstream_turn2_final_text")
        server.serve_fixture("anthropic/04_tool_use_single_nonstream_turn2_final_text")
        llm = AnthropicCaller(base_url=server.url, api_key="sk-ant-test-0123456789abcdef")
        builder = (
            AgentBuilder("chat")
            .llm(llm)
            .tool(
                "get_weather",
                "Weather.",
                {"type": "object", "properties": {"location": {}, "units": {}}},
                lambda args: weather(**args),
            )
        )
        thread = builder.thread()
        first = thread.send("What is the weather in SF?")
        thread.send("And in Celsius?")
        sent = server.requests[2]["json"]
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert sent["messages"][1]["content"][0]["type"] == "tool_use"
    assert sent["messages"][2]["content"][0]["type"] == "tool_result"
    assert sent["messages"][3]["content"] == [{"type": "text", "text": first}]
    assert sent["messages"][4]["content"] == [{"type": "text", "text": "And in Celsius?"}]
    with LoopbackProvider() as server:
        server.serve_fixture("openai/01_text_nonstream")
        server.serve_fixture("openai/01_text_nonstream")
        openai = OpenAiCaller(base_url=server.url + "/v1", api_key="sk-test-0123456789abcdef")
        thread = make_agent("chat").llm(openai).thread()
        first = thread.send("Hello?")
        thread.send("And again?")
        sent = server.requests[1]["json"]
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert sent["messages"][2] == {"role": "assistant", "content": first}


def test_thread_names_are_exported_and_checked() -> None:
    assert {"Thread", "ThreadBusy", "ThreadTurn"} <= set(agentsm.__all__)
    with pytest.raises(agentsm.BuildError, match="non-empty string"):
        make_agent("chat").thread().send("  ")
    assert isinstance(make_agent("chat").thread("x"), Thread)
    assert json.loads(json.dumps(ThreadTurn(id="t", turn=2, previous="t-1").info())) == {
        "thread": {"id": "t", "turn": 2, "previous": "t-1"}
    }
