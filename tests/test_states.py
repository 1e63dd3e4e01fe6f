"""Every branch of every built-in handler, each driven in isolation through the harness."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agentsm import (
    SUSPEND,
    AgentConfig,
    Event,
    LlmResponse,
    MockLlmCaller,
    TokenBudget,
    TokenUsage,
    ToolCall,
    ToolRegistry,
    tool,
)
from agentsm import facts as f
from agentsm.states import (
    COMPRESSION_PROMPT,
    ActingState,
    DoneState,
    ErrorState,
    ObservingState,
    ParallelActingState,
    PlanningState,
    ReflectingState,
    WaitingForHumanState,
)
from agentsm.types import HistoryEntry

from .conftest import Harness

LONG = "A final answer that is comfortably long enough."


def planned(*calls: ToolCall, parallel: bool = False) -> f.ToolCallsPlanned:
    return f.ToolCallsPlanned(calls=calls, parallel=parallel)


def registry(*funcs: Any) -> ToolRegistry:
    tools = ToolRegistry()
    for fn in funcs:
        tools.add(tool(fn))
    return tools


def echo(text: str) -> str:
    return text


def boom(text: str) -> str:
    raise ValueError(f"cannot handle {text}")


# -- Planning ---------------------------------------------------------------------------------


class TestPlanning:
    def test_final_answer_is_accepted(self) -> None:
        h = Harness(llm=MockLlmCaller([LlmResponse.final_answer(LONG)]))
        assert h.handle(PlanningState()) == Event.LlmFinalAnswer
        assert h.memory.final_answer == LONG
        assert h.memory.step == 1
        assert h.kinds() == ["StepStarted", "LlmRequested", "LlmResponded", "FinalAnswerProduced"]

    def test_guard_comes_before_increment(self) -> None:
        h = Harness(config=AgentConfig(max_steps=1)).given("Planning", f.StepStarted(step=1))
        assert h.handle(PlanningState()) == Event.MaxSteps
        assert h.memory.step == 1

    @pytest.mark.parametrize(
        ("task_type", "models", "expected"),
        [
            ("calculation", {"calculation": "small", "default": "big"}, "small"),
            ("research", {"calculation": "small", "default": "big"}, "big"),
            ("research", {"calculation": "small"}, ""),
        ],
    )
    def test_model_by_task_type_then_default_then_empty(
        self, task_type: str, models: dict[str, str], expected: str
    ) -> None:
        llm = MockLlmCaller([LlmResponse.final_answer(LONG)])
        h = Harness(llm=llm, task_type=task_type, config=AgentConfig(models=models))
        h.handle(PlanningState())
        assert llm.model_for_call(0) == expected
        assert h.facts("LlmRequested")[0].model == expected

    def test_llm_failure_is_fatal_with_message_kept(self) -> None:
        h = Harness(llm=MockLlmCaller([ConnectionError("upstream said 503")]))
        assert h.handle(PlanningState()) == Event.FatalError
        assert h.memory.error == "LLM call failed: ConnectionError: upstream said 503"
        failed = h.facts("LlmFailed")[0]
        assert (failed.error_type, failed.message) == ("ConnectionError", "upstream said 503")

    def test_exhausted_mock_fails_like_a_provider(self) -> None:
        h = Harness(llm=MockLlmCaller([]))
        assert h.handle(PlanningState()) == Event.FatalError
        assert "no more programmed responses" in (h.memory.error or "")

    def test_low_confidence_with_retries_left(self) -> None:
        llm = MockLlmCaller([LlmResponse.tool_call("echo", {"text": "x"}, confidence=0.1)])
        h = Harness(llm=llm, config=AgentConfig(confidence_threshold=0.5, max_retries=1))
        assert h.handle(PlanningState()) == Event.LowConfidence
        assert h.memory.retry_count == 1
        assert h.memory.confidence_score == 0.1
        assert h.memory.planned_calls == ()

    def test_low_confidence_without_retries_is_accepted(self) -> None:
        llm = MockLlmCaller([LlmResponse.tool_call("echo", {"text": "x"}, confidence=0.1)])
        h = Harness(llm=llm, config=AgentConfig(confidence_threshold=0.5, max_retries=0))
        assert h.handle(PlanningState()) == Event.LlmToolCall
        assert h.memory.current_tool_call is not None

    def test_blacklisted_call_in_a_batch_refuses_the_whole_batch(self) -> None:
        calls = [ToolCall(name="echo", args={"text": "a"}), ToolCall(name="rm", args={})]
        h = Harness(llm=MockLlmCaller([LlmResponse.tool_calls(calls)]), blacklist=("rm",))
        assert h.handle(PlanningState()) == Event.ToolBlacklisted
        first, second = h.memory.rejected
        assert first.observation.startswith("ERROR: NotExecuted:")
        assert second.observation.startswith("ERROR: ToolBlacklisted:")
        ids = [m["tool_call_id"] for m in h.memory.build_messages() if m["role"] == "tool"]
        assert ids == [calls[0].id, calls[1].id]

    def test_several_calls_with_parallel_on_and_off(self) -> None:
        calls = [ToolCall(name="echo", args={"text": str(i)}) for i in range(3)]
        on = Harness(llm=MockLlmCaller([LlmResponse.tool_calls(calls)]))
        assert on.handle(PlanningState()) == Event.LlmParallelToolCalls
        assert on.memory.parallel and on.memory.pending_tool_calls == tuple(calls)
        off = Harness(
            llm=MockLlmCaller([LlmResponse.tool_calls(calls)]),
            config=AgentConfig(parallel_tools=False),
        )
        assert off.handle(PlanningState()) == Event.LlmToolCall
        assert not off.memory.parallel and len(off.memory.planned_calls) == 3

    def test_approval_required(self) -> None:
        llm = MockLlmCaller([LlmResponse.tool_call("echo", {"text": "x"})])
        h = Harness(llm=llm, tools=registry(echo), approval_required=("echo",))
        assert h.handle(PlanningState()) == Event.HumanApprovalRequired
        assert h.memory.pending_approval == (h.memory.planned_calls[0].id,)

    def test_too_short_answer(self) -> None:
        h = Harness(llm=MockLlmCaller([LlmResponse.final_answer("Paris")]))
        assert h.handle(PlanningState()) == Event.AnswerTooShort
        assert h.memory.final_answer is None
        assert "shorter than 20" in h.facts("AnswerRejected")[0].reason

    def test_answer_cut_off_at_token_limit_is_not_accepted(self) -> None:
        cut = LlmResponse(content=LONG, stop_reason="max_tokens")
        h = Harness(llm=MockLlmCaller([cut]))
        assert h.handle(PlanningState()) == Event.AnswerTooShort
        assert "token limit" in h.facts("AnswerRejected")[0].reason

    def test_budget_checked_before_the_call(self) -> None:
        usage = TokenUsage(input_tokens=80, output_tokens=30)
        llm = MockLlmCaller([LlmResponse.tool_call("echo", {"text": "x"}, usage=usage)])
        h = Harness(llm=llm, budget=TokenBudget(max_total_tokens=100))
        assert h.handle(PlanningState()) == Event.LlmToolCall
        assert h.memory.total_usage.total_tokens == 110
        assert h.handle(PlanningState()) == Event.BudgetExceeded
        assert llm.call_count() == 1
        assert "110 of 100 tokens" in (h.memory.error or "")


# -- Acting / ParallelActing ------------------------------------------------------------------


class TestActing:
    def test_no_planned_call_is_fatal(self) -> None:
        h = Harness()
        assert h.handle(ActingState()) == Event.FatalError
        assert "no planned tool call" in (h.memory.error or "")

    def test_success(self) -> None:
        h = Harness(tools=registry(echo)).given(
            "Planning", planned(ToolCall(name="echo", args={"text": "hi"}))
        )
        assert h.handle(ActingState()) == Event.ToolSuccess
        assert h.memory.last_observation == "SUCCESS: hi"
        assert h.kinds()[-2:] == ["ToolCallStarted", "ToolExecuted"]

    def test_exception_becomes_observation(self) -> None:
        h = Harness(tools=registry(boom)).given(
            "Planning", planned(ToolCall(name="boom", args={"text": "x"}))
        )
        assert h.handle(ActingState()) == Event.ToolFailure
        assert h.memory.last_observation == "ERROR: ValueError: cannot handle x"

    def test_invalid_arguments_against_schema(self) -> None:
        tools = ToolRegistry()
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        tools.register("square", "Square a number", schema, lambda a: a["n"] ** 2)
        h = Harness(tools=tools).given(
            "Planning", planned(ToolCall(name="square", args={"n": "seven"}))
        )
        assert h.handle(ActingState()) == Event.ToolFailure
        assert h.memory.last_observation == (
            "ERROR: InvalidArguments: args.n should be integer, got str"
        )

    def test_invalid_arguments_for_typed_tool(self) -> None:
        h = Harness(tools=registry(echo)).given(
            "Planning", planned(ToolCall(name="echo", args={"txt": "x"}))
        )
        assert h.handle(ActingState()) == Event.ToolFailure
        assert (h.memory.last_observation or "").startswith("ERROR: InvalidArguments: args.")

    def test_timeout(self) -> None:
        async def slow(text: str) -> str:
            await asyncio.sleep(5)
            return text

        tools = ToolRegistry()
        tools.add(tool(timeout=0.05, idempotent=True)(slow))
        h = Harness(tools=tools).given(
            "Planning", planned(ToolCall(name="slow", args={"text": "x"}))
        )
        assert h.handle(ActingState()) == Event.ToolFailure
        assert h.memory.last_observation == (
            "ERROR: TimeoutError: tool 'slow' did not finish in 0.05s and was abandoned"
        )

    def test_timeout_of_a_tool_not_idempotent_asks_a_human(self) -> None:
        async def slow(text: str) -> str:
            await asyncio.sleep(5)
            return text

        tools = ToolRegistry()
        tools.add(tool(timeout=0.05)(slow))
        call = ToolCall(name="slow", args={"text": "x"})
        h = Harness(tools=tools).given("Planning", planned(call))
        assert h.handle(ActingState()) == Event.ToolOutcomeUnknown
        assert h.memory.in_flight == (call.id,) and h.memory.results == ()
        assert h.memory.pending_approval == (call.id,)
        assert h.memory.approval_reason == "outcome_unknown"

    def test_several_calls_run_in_order(self) -> None:
        seen: list[str] = []

        def note(text: str) -> str:
            seen.append(text)
            return text

        calls = [ToolCall(name="note", args={"text": str(i)}) for i in range(3)]
        h = Harness(tools=registry(note)).given("Planning", planned(*calls))
        assert h.handle(ActingState()) == Event.ToolSuccess
        assert seen == ["0", "1", "2"]
        assert [r.call.id for r in h.memory.results] == [c.id for c in calls]

    def test_parallel_runs_concurrently_and_records_in_call_order(self) -> None:
        barrier = threading.Barrier(2, timeout=5)
        second_done = threading.Event()

        def first(text: str) -> str:
            barrier.wait()  # only passes if both run at once
            second_done.wait(5)
            return "first"

        def second(text: str) -> str:
            barrier.wait()
            second_done.set()
            return "second"

        calls = [
            ToolCall(name="first", args={"text": ""}),
            ToolCall(name="second", args={"text": ""}),
        ]
        h = Harness(tools=registry(first, second)).given("Planning", planned(*calls, parallel=True))
        assert h.handle(ParallelActingState()) == Event.ToolSuccess
        assert [r.observation for r in h.memory.results] == ["SUCCESS: first", "SUCCESS: second"]
        kinds = h.kinds()
        assert kinds[-4:] == ["ToolCallStarted", "ToolCallStarted", "ToolExecuted", "ToolExecuted"]

    def test_parallel_mixes_async_and_sync_and_failure(self) -> None:
        async def later(text: str) -> str:
            await asyncio.sleep(0.01)
            return text

        calls = [
            ToolCall(name="later", args={"text": "a"}),
            ToolCall(name="boom", args={"text": "b"}),
        ]
        h = Harness(tools=registry(later, boom)).given("Planning", planned(*calls, parallel=True))
        assert h.handle(ParallelActingState()) == Event.ToolFailure
        assert [r.success for r in h.memory.results] == [True, False]

    def test_parallel_with_nothing_planned(self) -> None:
        assert Harness().handle(ParallelActingState()) == Event.ToolFailure


# -- WaitingForHuman --------------------------------------------------------------------------


def waiting(
    h: Harness, *calls: ToolCall, parallel: bool = False, need: int | None = None
) -> Harness:
    ids = tuple(c.id for c in calls[: need or len(calls)])
    return h.given(
        "Planning", planned(*calls, parallel=parallel), f.ApprovalRequested(call_ids=ids)
    )


class TestWaitingForHuman:
    call = ToolCall(name="echo", args={"text": "x"})

    def test_approve(self) -> None:
        h = waiting(Harness(approval=lambda r: True), self.call)
        assert h.handle(WaitingForHumanState()) == Event.HumanApproved
        assert h.memory.pending_approval == ()

    def test_reject_becomes_failed_result(self) -> None:
        h = waiting(Harness(approval=lambda r: False), self.call)
        assert h.handle(WaitingForHumanState()) == Event.HumanRejected
        assert (h.memory.last_observation or "").startswith("ERROR: HumanRejected:")
        h.handle(ObservingState())
        assert h.memory.history[0].success is False

    def test_modify_replaces_arguments(self) -> None:
        async def change(request: Any) -> dict[str, Any]:
            return {"text": "safer"}

        h = waiting(Harness(approval=change), self.call)
        assert h.handle(WaitingForHumanState()) == Event.HumanModified
        assert h.memory.current_tool_call is not None
        assert h.memory.current_tool_call.args == {"text": "safer"}
        assert h.memory.current_tool_call.id == self.call.id

    def test_no_callback_suspends(self) -> None:
        h = waiting(Harness(), self.call)
        assert h.handle(WaitingForHumanState()) is SUSPEND
        assert h.memory.pending_approval == (self.call.id,)

    def test_batch_partly_rejected_continues_as_batch(self) -> None:
        a = ToolCall(name="echo", args={"text": "a"})
        b = ToolCall(name="echo", args={"text": "b"})
        h = waiting(Harness(approval=lambda r: r.call.id == a.id), a, b, parallel=True)
        assert h.handle(WaitingForHumanState()) == Event.HumanApprovedBatch
        assert h.memory.unfinished_calls() == (a,)

    def test_batch_all_rejected(self) -> None:
        a = ToolCall(name="echo", args={"text": "a"})
        b = ToolCall(name="echo", args={"text": "b"})
        h = waiting(Harness(approval=lambda r: False), a, b, parallel=True)
        assert h.handle(WaitingForHumanState()) == Event.HumanRejected

    def test_bad_callback_answer_is_explained(self) -> None:
        h = waiting(Harness(approval=lambda r: "yes"), self.call)
        with pytest.raises(TypeError, match="return True"):
            h.handle(WaitingForHumanState())


# -- Observing --------------------------------------------------------------------------------


class TestObserving:
    def test_refusals_first_then_results_in_call_order_with_text(self) -> None:
        a = ToolCall(name="a", args={})
        b = ToolCall(name="b", args={})
        refused = HistoryEntry(
            step=1, tool=ToolCall(name="rm"), observation="ERROR: x", success=False
        )
        h = Harness().given(
            "Planning",
            f.StepStarted(step=2),
            f.ToolsRejected(entries=(refused,)),
            f.ToolCallsPlanned(calls=(a, b), parallel=True, text="Let me check both."),
        )
        h.given(
            "ParallelActing",
            f.ToolExecuted(call=b, observation="SUCCESS: b", success=True),
            f.ToolExecuted(call=a, observation="SUCCESS: a", success=True),
        )
        assert h.handle(ObservingState()) == Event.Continue
        assert [e.tool.name for e in h.memory.history] == ["rm", "a", "b"]
        assert [e.text for e in h.memory.history] == [None, "Let me check both.", None]
        assert h.memory.planned_calls == () and h.memory.rejected == ()

    def test_reflection_disabled_with_zero(self) -> None:
        h = Harness(config=AgentConfig(reflect_every_n_steps=0)).given(
            "Planning", f.StepStarted(step=5)
        )
        assert h.handle(ObservingState()) == Event.Continue


# -- Reflecting -------------------------------------------------------------------------------


def with_history(h: Harness, n: int = 2) -> Harness:
    entries = tuple(
        HistoryEntry(
            step=i,
            tool=ToolCall(name="echo", args={"text": str(i)}, id=f"c{i}"),
            observation=f"SUCCESS: {i}",
            success=True,
        )
        for i in range(1, n + 1)
    )
    h.given("Planning", f.StepStarted(step=n), f.ConfidenceLow(confidence=0.1, threshold=0.4))
    return h.given("Observing", f.ObservationCommitted(entries=entries))


class TestReflecting:
    def test_compresses_with_the_exact_prompt(self) -> None:
        llm = MockLlmCaller([LlmResponse.final_answer("Found 1 and 2.")])
        h = with_history(Harness(llm=llm, task="Count."))
        history_json = __import__("json").dumps(
            [e.model_dump(mode="json") for e in h.memory.history]
        )
        assert h.handle(ReflectingState()) == Event.ReflectDone
        shown = llm.calls[0].memory
        assert shown.build_messages() == [
            {
                "role": "user",
                "content": COMPRESSION_PROMPT.format(task="Count.", history_json=history_json),
            }
        ]
        assert COMPRESSION_PROMPT.startswith(
            "Summarize the following tool call history into a single concise paragraph\n"
            "that preserves all key facts, findings, and data needed to continue the task.\n"
        )
        assert llm.calls[0].tool_names == ()
        assert [e.tool.name for e in h.memory.history] == ["[SUMMARY]"]
        assert h.memory.history[0].observation == "Found 1 and 2."
        assert h.memory.retry_count == 0
        summary_msg = h.memory.build_messages()[-1]
        assert summary_msg == {
            "role": "user",
            "content": "Summary of the work so far: Found 1 and 2.",
        }

    def test_failure_keeps_history(self) -> None:
        h = with_history(Harness(llm=MockLlmCaller([TimeoutError("slow")])))
        before = h.memory.history
        assert h.handle(ReflectingState()) == Event.ReflectDone
        assert h.memory.history == before
        assert h.memory.retry_count == 1
        assert "TimeoutError: slow" in h.facts("ReflectionSkipped")[0].reason

    def test_tool_call_instead_of_summary_keeps_history(self) -> None:
        h = with_history(Harness(llm=MockLlmCaller([LlmResponse.tool_call("echo", {})])))
        assert h.handle(ReflectingState()) == Event.ReflectDone
        assert len(h.memory.history) == 2

    def test_empty_history_skips_the_call(self) -> None:
        llm = MockLlmCaller([])
        h = Harness(llm=llm)
        assert h.handle(ReflectingState()) == Event.ReflectDone
        assert llm.call_count() == 0

    def test_budget_exhausted_skips_the_call(self) -> None:
        llm = MockLlmCaller([])
        h = with_history(Harness(llm=llm, budget=TokenBudget(max_total_tokens=10)))
        h.given(
            "Planning",
            f.LlmResponded(
                purpose="plan",
                response=LlmResponse.final_answer("x", usage=TokenUsage(input_tokens=10)),
            ),
        )
        assert h.handle(ReflectingState()) == Event.ReflectDone
        assert llm.call_count() == 0


# -- Done / Error -----------------------------------------------------------------------------


def test_terminal_states_record_only_their_closing_fact() -> None:
    h = Harness().given("Planning", f.FinalAnswerProduced(content=LONG))
    before = h.memory
    h.handle(DoneState())
    assert h.memory == before
    assert h.kinds()[-1] == "RunFinished" and h.facts("RunFinished")[0].final_answer == LONG
    e = Harness().given("Planning", f.RunFailed(reason="x", message="it broke"))
    e.handle(ErrorState())
    assert e.facts("RunFinished")[0].error == "it broke"
    unknown = Harness()
    unknown.handle(ErrorState())
    assert unknown.facts("RunFinished")[0].error == "Unknown error"


def test_slow_sync_tool_does_not_block_the_loop() -> None:
    def sleepy(text: str) -> str:
        time.sleep(0.05)
        return text

    calls = [ToolCall(name="sleepy", args={"text": str(i)}) for i in range(4)]
    h = Harness(tools=registry(sleepy)).given("Planning", planned(*calls, parallel=True))
    assert h.handle(ParallelActingState()) == Event.ToolSuccess
    assert len(h.memory.results) == 4


def test_a_refused_answer_is_shown_to_the_llm_on_its_next_call() -> None:
    llm = MockLlmCaller([LlmResponse.final_answer("Paris"), LlmResponse.final_answer(LONG)])
    h = Harness(llm=llm)
    assert h.handle(PlanningState()) == Event.AnswerTooShort
    assert h.handle(PlanningState()) == Event.LlmFinalAnswer
    second = llm.calls[1].memory.build_messages()
    assert second[-2:] == [
        {"role": "assistant", "content": "Paris"},
        {
            "role": "user",
            "content": "That answer was not accepted: answer of 5 characters is "
            "shorter than 20. Please answer fully.",
        },
    ]
    first, again = h.facts("LlmRequested")
    assert first.messages_digest != again.messages_digest  # the request changed
