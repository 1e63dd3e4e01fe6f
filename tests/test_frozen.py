"""Effects never change the record: recorded arguments are read-only, and tools, approval
callbacks, tool runners and LLM callers get plain copies they may change freely."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentMemory,
    ApprovalRequest,
    LlmResponse,
    MockLlmCaller,
    ToolCall,
    ToolOutcome,
    fold,
    tool,
)
from agentsm import facts as f
from agentsm.frozen import FrozenDict, FrozenList, freeze, thaw
from eventstore import SQLiteEventStore
from replay import replay_run

ANSWER = "Paid, and the record says exactly what was paid."
SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "integer"}, "items": {"type": "array"}},
    "required": ["amount", "items"],
}


def agent(*responses: LlmResponse) -> AgentBuilder:
    script = [*responses, LlmResponse.final_answer(ANSWER)]
    return AgentBuilder("pay").llm(MockLlmCaller(script)).store(SQLiteEventStore())


def recorded_args(engine: Any) -> list[dict[str, Any]]:
    """The arguments of every call in every fact of the run, in order."""
    out: list[dict[str, Any]] = []
    for fact in engine.trace().facts():
        if isinstance(fact, f.ToolCallsPlanned):
            out += [c.args for c in fact.calls]
        elif isinstance(fact, f.ToolCallStarted | f.ToolExecuted):
            out.append(fact.call.args)
        elif isinstance(fact, f.ObservationCommitted):
            out += [e.tool.args for e in fact.entries]
    return out


def test_a_tool_that_edits_its_arguments_changes_nothing_recorded() -> None:
    seen: list[dict[str, Any]] = []

    def greedy(args: dict[str, Any]) -> str:
        args["amount"] = 1000
        args["items"].append("extra")
        seen.append(args)
        return "paid"

    @tool
    def order(amount: int, items: list[str], meta: dict[str, Any]) -> str:
        items.append("extra")
        meta["forged"] = True
        return "ordered"

    calls = [
        ToolCall(name="pay", args={"amount": 5, "items": ["a"]}),
        ToolCall(name="order", args={"amount": 5, "items": ["a"], "meta": {}}),
    ]
    engine = agent(LlmResponse.tool_calls(calls)).tool("pay", "Pay", SCHEMA, greedy).tool(order)
    built = engine.build()
    live: list[AgentMemory] = []
    built.observe(lambda seq, state, fact, memory: live.append(memory))
    assert built.run() == ANSWER
    assert seen == [{"amount": 1000, "items": ["a", "extra"]}]  # the tool had its own copy
    assert (
        recorded_args(built)
        == [
            {"amount": 5, "items": ["a"]},
            {"amount": 5, "items": ["a"], "meta": {}},
        ]
        * 4
    )
    facts = built.trace().facts()
    for i in range(1, len(facts) + 1):
        assert fold(facts[:i]) == live[i - 1], f"seq {i}"
    assert replay_run(built.store, built.run_id).identical


def test_an_approval_callback_that_edits_the_request_runs_what_the_log_approved() -> None:
    paid: list[int] = []

    @tool
    def pay(amount: int) -> str:
        paid.append(amount)
        return "paid"

    def sneaky(request: ApprovalRequest) -> bool:
        request.call.args["amount"] = 1_000_000  # a plain copy: allowed, and changes nothing
        return True

    engine = (
        agent(LlmResponse.tool_call("pay", {"amount": 5}))
        .tool(pay)
        .require_approval("pay")
        .on_approval(sneaky)
        .build()
    )
    assert engine.run() == ANSWER
    assert paid == [5]
    assert engine.memory.history[0].tool.args == {"amount": 5}
    decided = [x for x in engine.trace().facts() if isinstance(x, f.HumanDecided)]
    assert [d.verdict for d in decided[0].decisions] == ["approved"]


def test_a_custom_tool_runner_gets_a_plain_copy() -> None:
    async def runner(call: ToolCall) -> ToolOutcome:
        call.args["amount"] = 0
        return ToolOutcome.ok("ran")

    engine = agent(LlmResponse.tool_call("pay", {"amount": 5, "items": []}))
    built = engine.tool("pay", "Pay", SCHEMA, lambda a: "paid").tool_runner(runner).build()
    assert built.run() == ANSWER
    assert recorded_args(built) == [{"amount": 5, "items": []}] * 4


def test_an_llm_caller_cannot_change_memory() -> None:
    attempts: list[str] = []

    def meddling_llm(memory: AgentMemory, tools: Any, model: str) -> LlmResponse:
        messages = memory.build_messages()  # a plain copy: the caller may change it
        turn = next(m for m in messages if m.get("tool_calls"))
        turn["tool_calls"][0]["arguments"]["amount"] = 0
        try:
            memory.history[0].tool.args["amount"] = 0
        except TypeError as e:
            attempts.append(str(e))
        return LlmResponse.final_answer(ANSWER)

    llm = MockLlmCaller([LlmResponse.tool_call("pay", {"amount": 5, "items": []}), meddling_llm])
    engine = AgentBuilder("pay").llm(llm).tool("pay", "Pay", SCHEMA, lambda a: "paid").build()
    assert engine.run() == ANSWER
    assert engine.memory.history[0].tool.args == {"amount": 5, "items": []}
    assert attempts and "part of a recorded fact" in attempts[0]


def test_frozen_values_read_like_json_and_refuse_changes() -> None:
    value = freeze({"a": [1, {"b": 2}], "c": (3, [4])})
    assert isinstance(value, FrozenDict) and isinstance(value["a"], FrozenList)
    assert value == {"a": [1, {"b": 2}], "c": (3, [4])}
    assert json.loads(json.dumps(value)) == {"a": [1, {"b": 2}], "c": [3, [4]]}
    assert copy.deepcopy(value) is value and pickle.loads(pickle.dumps(value)) == value
    for change in (
        lambda: value.update(x=1),
        lambda: value.__setitem__("a", 1),
        lambda: value["a"].append(5),
        lambda: value["a"][1].pop("b"),
        lambda: value["c"][1].sort(),
    ):
        with pytest.raises(TypeError, match="thaw"):
            change()
    plain = thaw(value)
    plain["a"].append(5)
    assert type(plain) is dict and type(plain["a"]) is list and value["a"] == [1, {"b": 2}]
    assert ToolCall(name="t").args == {} and isinstance(ToolCall(name="t").args, FrozenDict)
