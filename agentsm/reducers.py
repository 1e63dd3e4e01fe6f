"""The reducer of each kind of fact: a small pure function from (fact, memory) to the memory
after it, registered on `reducing.reduce_fact`, which `memory.apply` dispatches through (memory
imports this module, and so registers them). Only these functions change memory; a run's first
fact, RunStarted, starts it (`memory.initial_memory`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import facts as f
from . import window
from .digests import history_digest
from .frozen import FrozenDict
from .history import History
from .inputs import with_message
from .places import committed_entries
from .reducing import evolve, reduce_fact, unchanged
from .types import USER_MESSAGE, HistoryEntry, ToolCall, ToolResult

if TYPE_CHECKING:
    from .memory import AgentMemory

__all__: list[str] = []

_NO_ARGS = FrozenDict()


for _kind in (
    f.LlmRequested,
    f.LlmFailed,
    f.ReflectionSkipped,
    f.Transitioned,
    f.RunFinished,
    f.RunAborted,
    f.ValueDrawn,
    f.UnknownFact,  # a user's fact not registered here: its part stays as it was
    f.StopRequested,  # the run stopped there: it goes on from the same memory
):
    reduce_fact.register(_kind)(unchanged)


@reduce_fact.register(f.PatchMarked)
def _(fact: f.PatchMarked, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"patches": memory.patches | {fact.change_id}})


@reduce_fact.register(f.StepStarted)
def _(fact: f.StepStarted, memory: AgentMemory) -> AgentMemory:
    if memory.context_full is not None:
        return evolve(memory, {"step": fact.step, "context_full": None})
    return evolve(memory, {"step": fact.step})


@reduce_fact.register(f.LlmResponded)
def _(fact: f.LlmResponded, memory: AgentMemory) -> AgentMemory:
    update: dict[str, Any] = {}
    if fact.purpose == "plan":  # what a plan of these very calls names (ToolCallsPlanned)
        update["offered_calls"] = fact.response.calls
        update["offered_text"] = fact.response.content
        if fact.response.reasoning or memory.offered_reasoning:
            update["offered_reasoning"] = fact.response.reasoning
    if fact.response.usage is not None:
        update["total_usage"] = memory.total_usage + fact.response.usage
    if fact.purpose == "plan" and fact.response.confidence != memory.confidence_score:
        update["confidence_score"] = fact.response.confidence
    if fact.purpose == "plan" and memory.config.context_window is not None:
        counted = window.prompt_tokens(fact.response.usage)
        if counted is not None:  # the provider counted the request these messages made
            update["context_mark"] = (counted, window.message_tokens(memory))
    return evolve(memory, update) if update else memory


@reduce_fact.register(f.ConfidenceLow)
def _(fact: f.ConfidenceLow, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"retry_count": memory.retry_count + 1})


@reduce_fact.register(f.ToolsRejected)
def _(fact: f.ToolsRejected, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"rejected": memory.rejected + fact.entries})


@reduce_fact.register(f.ToolCallsPlanned)
def _(fact: f.ToolCallsPlanned, memory: AgentMemory) -> AgentMemory:
    named = fact.calls is None  # the plan response's calls and text, not written again
    reasoning = memory.offered_reasoning if named else fact.reasoning or ()
    return evolve(
        memory,
        {
            "planned_calls": memory.offered_calls if named else fact.calls,
            "parallel": fact.parallel,
            "planned_text": memory.offered_text if named else fact.text,
            "planned_reasoning": reasoning,
            "results": (),
            "decisions": (),
            "awaiting": (),
            "started": (),
            "own_calls": (),
        },
    )


@reduce_fact.register(f.ApprovalRequested)
def _(fact: f.ApprovalRequested, memory: AgentMemory) -> AgentMemory:
    candidates = list(memory.unfinished())
    if fact.reason == "outcome_unknown":
        candidates = [i for i in candidates if i in memory.started]
    awaiting: list[int] = []
    if fact.indices is not None:
        awaiting = [i for i in fact.indices if i in candidates]
    else:
        for call_id in fact.call_ids:  # in the LLM's order: the n-th of an id is the n-th
            found = next((i for i in candidates if memory.planned_calls[i].id == call_id), None)
            if found is not None:
                candidates.remove(found)
                awaiting.append(found)
    return evolve(memory, {"awaiting": tuple(awaiting), "approval_reason": fact.reason})


def _history(memory: AgentMemory) -> History:
    """Memory's history as a History (a memory changed by hand with `model_copy(update=...)`
    may hold a plain tuple)."""
    history = memory.history
    return history if isinstance(history, History) else History(history)


@reduce_fact.register(f.ToolCallStarted)
def _(fact: f.ToolCallStarted, memory: AgentMemory) -> AgentMemory:
    if fact.index is None:  # a log from before version 2: the place is found by the call
        position = memory.start_position(fact.call) if fact.call is not None else None
    else:
        position = fact.index if fact.index < len(memory.planned_calls) else None
    if position is None:  # not one of the planned calls (a custom handler's own)
        if fact.call is None:
            return memory
        return evolve(memory, {"own_calls": (*memory.own_calls, fact.call)})
    started = (*(i for i in memory.started if i != position), position)
    return evolve(memory, {"started": started})


@reduce_fact.register(f.RunBranched)
def _(fact: f.RunBranched, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"config": fact.config}) if fact.config else memory


@reduce_fact.register(f.HumanDecided)
def _(fact: f.HumanDecided, memory: AgentMemory) -> AgentMemory:
    calls = list(memory.planned_calls)
    results = list(memory.results)
    decided: set[int] = set()
    for d, target in zip(fact.decisions, memory.decision_targets(fact.decisions), strict=True):
        if target is None:
            continue
        decided.add(target)
        call = calls[target]
        if d.verdict == "answered":  # a question to a person: the answer is its result
            text = f"SUCCESS: {d.answer or ''}"  # as `ToolOutcome.ok` words a tool's result
            results.append(ToolResult(call=call, observation=text, success=True, index=target))
        elif d.verdict == "modified" and d.args is not None:
            calls[target] = call.model_copy(update={"args": d.args})
        elif d.verdict == "rejected":
            why = f" ({d.note})" if d.note else ""
            if memory.approval_reason == "outcome_unknown":
                text = (
                    f"ERROR: OutcomeUnknown: the process stopped while '{call.name}' ran and a "
                    f"human chose not to run it again; it may have taken effect{why}."
                )
            else:
                text = f"ERROR: HumanRejected: a human rejected the call to '{call.name}'{why}."
            results.append(ToolResult(call=call, observation=text, success=False, index=target))
    awaiting = tuple(i for i in memory.awaiting if i not in decided)
    return evolve(
        memory,
        {
            "planned_calls": tuple(calls),
            "results": tuple(results),
            "awaiting": awaiting,
            "decisions": memory.decisions + fact.decisions,
            "approval_reason": memory.approval_reason if awaiting else "approval",
            "started": tuple(i for i in memory.started if i not in decided),
        },
    )


@reduce_fact.register(f.ToolExecuted)
def _(fact: f.ToolExecuted, memory: AgentMemory) -> AgentMemory:
    call = fact.call
    position: int | None
    if fact.index is None:  # a log from before version 2: the place is found by the call
        position = memory.result_position(call) if call is not None else None
    else:
        position = fact.index if fact.index < len(memory.planned_calls) else None
        call = memory.call_at(fact.index) or call
    if call is None:
        raise ValueError(f"ToolExecuted names the call at place {fact.index}, and there is none")
    result = ToolResult.model_construct(  # values of a validated fact and of memory
        call=call,
        observation=fact.observation,
        success=fact.success,
        index=position,
        images=fact.images or (),
    )
    started = tuple(i for i in memory.started if i != position)
    update: dict[str, Any] = {"results": (*memory.results, result), "started": started}
    if fact.usage is not None:  # a sub-agent's tokens, counted into the parent's budget
        update["total_usage"] = memory.total_usage + fact.usage
    return evolve(memory, update)


@reduce_fact.register(f.ObservationCommitted)
def _(fact: f.ObservationCommitted, memory: AgentMemory) -> AgentMemory:
    entries = fact.entries or ()
    if fact.results is not None:  # the step's results at these places, not written again
        entries += committed_entries(memory, fact.results)
    if memory.steered:  # sent while the step's calls ran: after them
        entries += memory.steered
        memory = evolve(memory, {"steered": ()})
    return evolve(
        memory,
        {
            "history": _history(memory).added(entries),
            "history_digest": history_digest(memory.history_digest, entries),
            "offered_calls": (),
            "offered_text": None,
            "offered_reasoning": (),
            "planned_calls": (),
            "parallel": False,
            "planned_text": None,
            "planned_reasoning": (),
            "results": (),
            "rejected": (),
            "refused_answers": (),
            "awaiting": (),
            "decisions": (),
            "started": (),
            "own_calls": (),
        },
    )


@reduce_fact.register(f.Steered)
def _(fact: f.Steered, memory: AgentMemory) -> AgentMemory:
    call = ToolCall.model_construct(name=USER_MESSAGE, args=_NO_ARGS, id=f"steered-{memory.step}")
    entry = HistoryEntry(step=memory.step, tool=call, observation=fact.text, success=True)
    counted = memory.user_messages + 1
    if memory.planned_calls or memory.rejected:  # a step's calls are under way: after them
        return evolve(memory, {"steered": (*memory.steered, entry), "user_messages": counted})
    return evolve(
        memory,
        {
            "history": _history(memory).added((entry,)),
            "history_digest": history_digest(memory.history_digest, (entry,)),
            "user_messages": counted,
        },
    )


@reduce_fact.register(f.InputChecked)
def _(fact: f.InputChecked, memory: AgentMemory) -> AgentMemory:
    number = memory.checked_messages
    update: dict[str, Any] = {"checked_messages": number + 1}
    if fact.verdict == "replaced" and fact.text is not None:
        update |= with_message(memory, number, fact.text)
        if "history" in update:  # a message in the middle of history: chained again
            update["history_digest"] = history_digest("", update["history"])
    elif fact.verdict == "refused":
        what = "the task" if number == 0 else f"message {number} sent to the run"
        update["error"] = f"An input guard refused {what}: {fact.reason}"
    return evolve(memory, update)


@reduce_fact.register(f.HookAborted)
def _(fact: f.HookAborted, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"error": f"The {fact.hook} hook ended the run: {fact.reason}"})


@reduce_fact.register(f.ToolCallVetoed)
def _(fact: f.ToolCallVetoed, memory: AgentMemory) -> AgentMemory:
    call = memory.call_at(fact.index)
    if call is None or fact.index >= len(memory.planned_calls):
        return memory
    text = f"ERROR: ToolVetoed: the call to '{call.name}' was refused before it ran: {fact.reason}"
    result = ToolResult(call=call, observation=text, success=False, index=fact.index)
    return evolve(memory, {"results": (*memory.results, result)})


@reduce_fact.register(f.ToolCallRewritten)
def _(fact: f.ToolCallRewritten, memory: AgentMemory) -> AgentMemory:
    if not 0 <= fact.index < len(memory.planned_calls):
        return memory
    calls = list(memory.planned_calls)
    calls[fact.index] = calls[fact.index].model_copy(update={"args": fact.args})
    return evolve(memory, {"planned_calls": tuple(calls)})


@reduce_fact.register(f.ObservationRewritten)
def _(fact: f.ObservationRewritten, memory: AgentMemory) -> AgentMemory:
    results = tuple(
        r.model_copy(update={"observation": fact.observation}) if r.index == fact.index else r
        for r in memory.results
    )
    return evolve(memory, {"results": results})


@reduce_fact.register(f.QuestionAsked)
def _(fact: f.QuestionAsked, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"asked": (*memory.asked, (fact.question, None))})


@reduce_fact.register(f.HumanAnswered)
def _(fact: f.HumanAnswered, memory: AgentMemory) -> AgentMemory:
    open_ = next((i for i, (_, answer) in enumerate(memory.asked) if answer is None), None)
    if open_ is None:
        return memory
    asked = list(memory.asked)
    asked[open_] = (asked[open_][0], fact.answer)
    return evolve(memory, {"asked": tuple(asked)})


@reduce_fact.register(f.HistoryCompressed)
def _(fact: f.HistoryCompressed, memory: AgentMemory) -> AgentMemory:
    update: dict[str, Any] = {
        "history": History((fact.summary,)),
        "history_digest": history_digest("", (fact.summary,)),
        "retry_count": 0,
    }
    if memory.carried:  # the summary covers the earlier turns too: it follows the task
        update["carried"] = 0
    return evolve(memory, update)


@reduce_fact.register(f.ContextLimitReached)
def _(fact: f.ContextLimitReached, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"context_full": fact.tokens})


@reduce_fact.register(f.ContextCompacted)
def _(fact: f.ContextCompacted, memory: AgentMemory) -> AgentMemory:
    history = window.compacted(memory.history, fact)
    update: dict[str, Any] = {"history": history, "history_digest": history_digest("", history)}
    if memory.carried:
        update["carried"] = window.carried_after(fact, memory.carried)
    return evolve(memory, update)


@reduce_fact.register(f.AnswerRejected)
def _(fact: f.AnswerRejected, memory: AgentMemory) -> AgentMemory:
    refused = (*memory.refused_answers, (fact.content, fact.reason))
    return evolve(memory, {"refused_answers": refused})


@reduce_fact.register(f.FinalAnswerProduced)
def _(fact: f.FinalAnswerProduced, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"final_answer": fact.content})


@reduce_fact.register(f.RunFailed)
def _(fact: f.RunFailed, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"error": fact.message})


reduce_fact.register(f.CandidatesGathered)(unchanged)
reduce_fact.register(f.JudgeAsked)(unchanged)


@reduce_fact.register(f.JudgeAnswered)
def _(fact: f.JudgeAnswered, memory: AgentMemory) -> AgentMemory:
    usage = fact.response.usage
    return evolve(memory, {"total_usage": memory.total_usage + usage}) if usage else memory


@reduce_fact.register(f.CandidatePicked)
def _(fact: f.CandidatePicked, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"final_answer": fact.answer})


@reduce_fact.register(f.PickRefused)
def _(fact: f.PickRefused, memory: AgentMemory) -> AgentMemory:
    return evolve(memory, {"error": fact.message})
