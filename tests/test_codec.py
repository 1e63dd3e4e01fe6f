"""Nothing is written that cannot be read back: every fact round-trips before it is committed, and
bad values from an LLM or a tool become data the run goes on with."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from agentsm import (
    AgentBuilder,
    AgentFailed,
    LlmResponse,
    MockLlmCaller,
    RunContext,
    State,
    ToolCall,
    UnrecordableFact,
    tool,
)
from agentsm import facts as f
from agentsm.codec import FactCodec, clean_text, value_problem
from agentsm.context import UNRECORDABLE
from agentsm.facts import FACTS
from agentsm.memory import fold_with_state
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import decide, replay_run
from replay.cli import main

LONG = "The answer, which is long enough to be accepted."
NAN = float("nan")


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def scrape(url: str) -> str:
    """Returns text cut in the middle of an emoji (a lone surrogate)."""
    return "page text \ud83d end"


def agent(script: list[Any], db: Path, run_id: str = "r") -> AgentBuilder:
    return (
        AgentBuilder("task")
        .llm(MockLlmCaller(script))
        .tool(lookup)
        .tool(scrape)
        .store(SQLiteEventStore(db))
        .run_id(run_id)
    )


def kinds(db: Path, run_id: str = "r") -> list[str]:
    return [e.event for e in Trace.load(SQLiteEventStore(db, create=False), run_id)]


BAD_RESPONSES = {
    "nan confidence": LlmResponse.tool_call("lookup", {"key": "a"}, confidence=NAN),
    "infinite confidence": LlmResponse.tool_call("lookup", {"key": "a"}, confidence=math.inf),
    "lone surrogate in an answer": LlmResponse.final_answer("An answer long enough \udc80 here."),
    "lone surrogate in arguments": LlmResponse.tool_call("lookup", {"key": "\ud800"}),
    "nan in arguments": LlmResponse.tool_call("lookup", {"key": "a", "n": NAN}),
    "tuple in arguments": LlmResponse.tool_call("lookup", {"key": ("a", "b")}),
    "set in arguments": LlmResponse.tool_call("lookup", {"key": {"a"}}),
    "object in arguments": LlmResponse.tool_call("lookup", {"key": object()}),
    "integer key in arguments": LlmResponse.tool_call("lookup", {"key": {1: "a"}}),
}


@pytest.mark.parametrize("name", sorted(BAD_RESPONSES))
def test_a_response_that_cannot_be_recorded_is_refused_and_the_llm_answers_again(
    name: str, tmp_path: Path
) -> None:
    db = tmp_path / "log.db"
    llm = MockLlmCaller([BAD_RESPONSES[name], LlmResponse.final_answer(LONG)])
    engine = agent([], db).llm(llm).build()
    assert engine.run() == LONG
    assert kinds(db)[3:7] == ["LlmRequested", "LlmFailed", "AnswerRejected", "Transitioned"]
    failed = engine.trace().facts()[4]
    assert isinstance(failed, f.LlmFailed) and failed.error_type == UNRECORDABLE
    refused = llm.calls[1].memory.refused_answers
    assert refused and "could not be recorded" in refused[0][1]  # the LLM was told why
    assert main(["--db", str(db), "runs"]) == 0
    assert replay_run(db, "r").identical


def test_the_refusal_names_the_bad_value() -> None:
    with pytest.raises(UnrecordableFact) as caught:
        FACTS.encode(f.LlmResponded(purpose="plan", response=BAD_RESPONSES["nan in arguments"]))
    assert "LlmResponded.response.calls[0].args.n is nan" in str(caught.value)
    with pytest.raises(UnrecordableFact, match=r"read back as the list \['a', 'b'\]"):
        FACTS.encode(f.LlmResponded(purpose="plan", response=BAD_RESPONSES["tuple in arguments"]))
    with pytest.raises(UnrecordableFact, match=r"lone surrogate \('\\udc80'\) at index 22"):
        FACTS.encode(f.FinalAnswerProduced(content="An answer long enough \udc80 here."))


def test_a_tool_output_that_cannot_be_recorded_becomes_a_failed_observation(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    llm = MockLlmCaller(
        [LlmResponse.tool_call("scrape", {"url": "u"}), LlmResponse.final_answer(LONG)]
    )
    assert agent([], db).llm(llm).build().run() == LONG
    entry = llm.calls[1].memory.history[0]
    assert not entry.success
    assert entry.observation.startswith(f"ERROR: {UNRECORDABLE}: the output of 'scrape'")
    assert "lone surrogate ('\\ud83d') at index 19" in entry.observation
    assert replay_run(db, "r").identical


def test_an_exception_message_with_a_lone_surrogate_is_kept_readable(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with pytest.raises(AgentFailed):
        agent([ConnectionError("reset by \udcff peer")], db).build().run()
    failed = [
        x for x in Trace.load(SQLiteEventStore(db), "r").facts() if isinstance(x, f.LlmFailed)
    ]
    assert failed[0].message == "reset by \ufffd peer"


def test_a_handler_recording_an_unrecordable_fact_aborts_with_a_readable_log(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"

    async def planning(ctx: RunContext) -> str:
        ctx.record(f.ConfidenceLow(confidence=NAN, threshold=0.5))
        return "LowConfidence"

    with pytest.raises(UnrecordableFact, match="ConfidenceLow.confidence is nan"):
        agent([], db).handler(State.Planning, planning).build().run()
    store = SQLiteEventStore(db)
    facts = Trace.load(store, "r").facts()
    assert [x.kind for x in facts[-2:]] == ["Transitioned", "RunAborted"]
    assert not any(isinstance(x, f.ConfidenceLow) for x in facts)
    assert store.run("r").status == "aborted"


def test_a_definition_that_cannot_be_recorded_creates_no_run(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    builder = agent([LlmResponse.final_answer(LONG)], db).system_prompt("bad \ud800 prompt")
    with pytest.raises(UnrecordableFact, match="RunStarted.system_prompt holds a lone surrogate"):
        builder.build().run()
    assert SQLiteEventStore(db).runs() == []


def test_a_decision_with_arguments_json_cannot_hold_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    builder = agent([LlmResponse.tool_call("lookup", {"key": "a"}, id="c1")], db)
    with pytest.raises(Exception, match="waits for a human"):
        builder.require_approval("lookup").build().run()
    store = SQLiteEventStore(db)
    before = store.run("r").last_seq
    with pytest.raises(UnrecordableFact, match="args.key holds a lone surrogate"):
        decide(store, "r", "modified", args={"key": "bad \ud800 key"})
    assert store.run("r").last_seq == before
    assert main(["--db", str(db), "modify", "r", "--args", '{"key": "\\ud800"}']) == 2


def test_value_problem_accepts_plain_json_and_names_the_rest() -> None:
    assert value_problem({"a": [1, 2.5, "ü", None, True, {"b": -0.0}]}) is None
    assert (
        value_problem({"a": [1, math.inf]}) == "value.a[1] is inf, and JSON has no NaN or infinity"
    )
    assert value_problem(b"x") == "value is a bytes (b'x'), which JSON cannot hold"
    assert value_problem({"\udc00": 1}) == "value key holds a lone surrogate ('\\udc00') at index 0"
    assert clean_text("a\ud800b") == "a\ufffdb"
    assert clean_text("plain ✓") == "plain ✓"


def test_every_fact_of_a_run_reads_back_as_it_was_recorded(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    calls = [
        ToolCall(name="lookup", args={"key": "ü ✓", "n": 1e300, "z": -0.0}, id=f"c{i}")
        for i in range(2)
    ]
    script = [LlmResponse.tool_calls(calls, content="two"), LlmResponse.final_answer(LONG)]
    engine = agent(script, db).build()
    engine.run()
    memory, _ = fold_with_state(engine.trace().facts())
    assert memory == engine.memory


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_plain_facts_are_checked_by_their_values_types_and_still_refuse_what_cannot_read_back() -> (
    None
):
    assert f.Transitioned in FACTS._plain and f.StepStarted in FACTS._plain
    assert f.ToolExecuted not in FACTS._plain  # a call's arguments are any JSON
    good = f.Transitioned(from_state="Planning", event="tool_calls", to_state="Acting")
    assert FACTS.decode(FACTS.encode(good), "Transitioned", FACTS.version("Transitioned")) == good
    with pytest.raises(UnrecordableFact, match="surrogate"):
        FACTS.encode(f.FinalAnswerProduced(content="a lone \ud800 surrogate"))
    # values that bypassed validation fall back to the full check, which names them
    wrong = f.StepStarted.model_construct(step=1.5)
    with pytest.raises(UnrecordableFact, match="StepStarted"):
        FACTS.encode(wrong)
    huge = f.StepStarted.model_construct(step=2**70)  # beyond the exact check: decoded again
    assert FACTS.decode(FACTS.encode(huge), "StepStarted") == huge


class Limited(BaseModel):
    kind: Literal["Limited"] = "Limited"
    limit: float | None = 5.0
    note: str | None = None


def test_a_payload_leaves_out_the_kind_defaults_and_nones_unless_a_none_would_not_come_back() -> (
    None
):
    codec = FactCodec([Limited])
    assert codec.encode(Limited()) == "{}"
    assert codec.encode(Limited(note="n")) == '{"note":"n"}'
    assert codec.encode(Limited(limit=2.0)) == '{"limit":2.0}'
    assert codec.decode("{}", "Limited") == Limited()
    # None is not the default here: left out, it would read back as 5.0, so all is written
    text = codec.encode(Limited(limit=None))
    assert text == '{"kind":"Limited","limit":null,"note":null}'
    assert codec.decode(text, "Limited") == Limited(limit=None)
    # payloads of earlier releases name their kind and every field: they decode the same
    assert codec.decode('{"kind":"Limited","limit":5.0,"note":null}', "Limited") == Limited()
