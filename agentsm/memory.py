"""AgentMemory, the agent's world-state, and the pure reducer that is the only code changing it.

Memory is never stored: `fold(facts)` rebuilds it from a run's log, and `apply(memory, fact)`
advances it by one fact. Each reducer is a small pure function returning a new frozen value.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import singledispatch
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, field_serializer

from . import facts as f
from .frozen import thaw
from .types import (
    AgentConfig,
    HistoryEntry,
    State,
    TokenBudget,
    TokenUsage,
    ToolCall,
    ToolResult,
    as_state,
)

if TYPE_CHECKING:
    from eventstore import EventStore

__all__ = ["AgentMemory", "apply", "fold"]


class AgentMemory(BaseModel):
    """The agent's entire world-state, a projection of the log (frozen: handlers record facts).

    `planned_calls` are the calls Planning chose and Observing clears; `results` their outcomes;
    `rejected` the calls Planning refused, shown to the LLM until Observing commits them;
    `decisions` the human's verdicts on them; `in_flight` the calls recorded as started and not
    (yet) as executed; `refused_answers` the (answer, reason) pairs Planning did not accept,
    shown to the LLM until Observing commits the next step.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    task_type: str = "default"
    system_prompt: str = ""
    step: int = 0
    retry_count: int = 0
    confidence_score: float = 1.0
    total_usage: TokenUsage = TokenUsage()
    budget: TokenBudget | None = None
    planned_calls: tuple[ToolCall, ...] = ()
    parallel: bool = False
    planned_text: str | None = None
    results: tuple[ToolResult, ...] = ()
    pending_approval: tuple[str, ...] = ()
    approval_reason: str = "approval"
    decisions: tuple[f.Decision, ...] = ()
    in_flight: tuple[str, ...] = ()
    rejected: tuple[HistoryEntry, ...] = ()
    refused_answers: tuple[tuple[str, str], ...] = ()
    history: tuple[HistoryEntry, ...] = ()
    history_digest: str = ""
    final_answer: str | None = None
    error: str | None = None
    config: AgentConfig = AgentConfig()
    blacklisted_tools: frozenset[str] = frozenset()
    approval_required: frozenset[str] = frozenset()
    patches: frozenset[str] = frozenset()

    @field_serializer("blacklisted_tools", "approval_required", "patches", when_used="json")
    def _sorted(self, names: frozenset[str]) -> list[str]:
        """Sets as sorted lists in JSON: their own order changes from one process to the next."""
        return sorted(names)

    # -- the specification's names for the tool-call lifecycle -------------------------------

    @property
    def current_tool_call(self) -> ToolCall | None:
        """The first planned call (the only one, outside parallel batches)."""
        return self.planned_calls[0] if self.planned_calls else None

    @property
    def pending_tool_calls(self) -> tuple[ToolCall, ...]:
        """Every planned call, in the LLM's order."""
        return self.planned_calls

    @property
    def last_observation(self) -> str | None:
        """The observation of the latest result not yet committed to history."""
        return self.results[-1].observation if self.results else None

    @property
    def parallel_results(self) -> tuple[ToolResult, ...]:
        """Results of the planned calls so far."""
        return self.results

    def awaiting_approval(self) -> tuple[ToolCall, ...]:
        """Planned calls that wait for a human decision, in the LLM's order."""
        return tuple(c for c in self.planned_calls if c.id in self.pending_approval)

    def unfinished_calls(self) -> tuple[ToolCall, ...]:
        """Planned calls that have no result yet (neither run nor rejected)."""
        done = {r.call.id for r in self.results}
        return tuple(c for c in self.planned_calls if c.id not in done)

    # -- what the LLM is sent ----------------------------------------------------------------

    def build_messages(self) -> list[dict[str, Any]]:
        """A provider-neutral conversation: system prompt, task, then each step's tool calls
        (one assistant turn with call ids) and their results; `[SUMMARY]` as readable context."""
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": self.task})
        turn: list[HistoryEntry] = []
        for entry in (*self.history, *self.rejected):
            if entry.is_summary:
                _flush_turn(turn, messages)
                messages.append(
                    {"role": "user", "content": f"Summary of the work so far: {entry.observation}"}
                )
            elif turn and turn[0].step != entry.step:
                _flush_turn(turn, messages)
                turn.append(entry)
            else:
                turn.append(entry)
        _flush_turn(turn, messages)
        for answer, reason in self.refused_answers:
            messages.append({"role": "assistant", "content": answer or "(empty answer)"})
            messages.append(
                {
                    "role": "user",
                    "content": f"That answer was not accepted: {reason}. Please answer fully.",
                }
            )
        return messages

    def messages_digest(self) -> str:
        """A digest of what `build_messages()` gives, in constant time per step."""
        rejected = [e.model_dump(mode="json") for e in self.rejected]
        refused = [list(pair) for pair in self.refused_answers]
        return _digest([self.system_prompt, self.task, self.history_digest, rejected, refused])

    @classmethod
    def rebuild(cls, store: EventStore, run_id: str) -> tuple[AgentMemory, str]:
        """Memory and state of a run, rebuilt from its log alone."""
        from .trace import decode

        return fold_with_state(decode(e) for e in store.read(run_id))

    def __repr__(self) -> str:
        return (
            f"AgentMemory(task={self.task[:40]!r}, step={self.step}, "
            f"history={len(self.history)} entries, final_answer={self.final_answer!r:.50}, "
            f"error={self.error!r}, usage={self.total_usage.total_tokens} tokens)"
        )


def _flush_turn(turn: list[HistoryEntry], messages: list[dict[str, Any]]) -> None:
    if not turn:
        return
    messages.append(
        {
            "role": "assistant",
            "content": turn[0].text,
            "tool_calls": [
                {"id": e.tool.id, "name": e.tool.name, "arguments": thaw(e.tool.args)} for e in turn
            ],
        }
    )
    for e in turn:
        messages.append(
            {
                "role": "tool",
                "tool_call_id": e.tool.id,
                "name": e.tool.name,
                "content": e.observation,
                "is_error": not e.success,
            }
        )
    turn.clear()


def _digest(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()[:32]


def _chain(previous: str, entries: Iterable[HistoryEntry]) -> str:
    return _digest([previous, [e.model_dump(mode="json") for e in entries]])


# -- the reducer ------------------------------------------------------------------------------


def apply(memory: AgentMemory, fact: Any) -> AgentMemory:
    """Memory after one more fact. Facts that change nothing return memory as it is."""
    return _reduce(fact, memory)


@singledispatch
def _reduce(fact: Any, memory: AgentMemory) -> AgentMemory:
    raise TypeError(f"apply() does not know the fact {fact!r}; add a reducer for its type.")


def _unchanged(fact: Any, memory: AgentMemory) -> AgentMemory:
    return memory


for _kind in (
    f.LlmRequested,
    f.LlmFailed,
    f.ReflectionSkipped,
    f.Transitioned,
    f.RunFinished,
    f.RunAborted,
):
    _reduce.register(_kind)(_unchanged)


@_reduce.register
def _(fact: f.PatchMarked, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(update={"patches": memory.patches | {fact.change_id}})


@_reduce.register
def _(fact: f.RunStarted, memory: AgentMemory) -> AgentMemory:
    return initial_memory(fact)


def initial_memory(fact: f.RunStarted) -> AgentMemory:
    """The memory a run starts with, from its RunStarted fact."""
    return AgentMemory(
        task=fact.task,
        task_type=fact.task_type,
        system_prompt=fact.system_prompt,
        config=fact.config,
        budget=fact.budget,
        blacklisted_tools=frozenset(fact.blacklisted_tools),
        approval_required=frozenset(fact.approval_required),
    )


@_reduce.register
def _(fact: f.StepStarted, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(update={"step": fact.step})


@_reduce.register
def _(fact: f.LlmResponded, memory: AgentMemory) -> AgentMemory:
    update: dict[str, Any] = {}
    if fact.response.usage is not None:
        update["total_usage"] = memory.total_usage + fact.response.usage
    if fact.purpose == "plan":
        update["confidence_score"] = fact.response.confidence
    return memory.model_copy(update=update) if update else memory


@_reduce.register
def _(fact: f.ConfidenceLow, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(update={"retry_count": memory.retry_count + 1})


@_reduce.register
def _(fact: f.ToolsRejected, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(update={"rejected": memory.rejected + fact.entries})


@_reduce.register
def _(fact: f.ToolCallsPlanned, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(
        update={
            "planned_calls": fact.calls,
            "parallel": fact.parallel,
            "planned_text": fact.text,
            "results": (),
            "decisions": (),
        }
    )


@_reduce.register
def _(fact: f.ApprovalRequested, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(
        update={"pending_approval": fact.call_ids, "approval_reason": fact.reason}
    )


@_reduce.register
def _(fact: f.ToolCallStarted, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(update={"in_flight": (*memory.in_flight, fact.call.id)})


@_reduce.register
def _(fact: f.RunBranched, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(update={"config": fact.config}) if fact.config else memory


@_reduce.register
def _(fact: f.HumanDecided, memory: AgentMemory) -> AgentMemory:
    verdicts = {d.call_id: d for d in fact.decisions}
    calls: list[ToolCall] = []
    results = list(memory.results)
    for call in memory.planned_calls:
        d = verdicts.get(call.id)
        if d is not None and d.verdict == "modified" and d.args is not None:
            call = call.model_copy(update={"args": d.args})
        elif d is not None and d.verdict == "rejected":
            why = f" ({d.note})" if d.note else ""
            if memory.approval_reason == "outcome_unknown":
                text = (
                    f"ERROR: OutcomeUnknown: the process stopped while '{call.name}' ran and a "
                    f"human chose not to run it again; it may have taken effect{why}."
                )
            else:
                text = f"ERROR: HumanRejected: a human rejected the call to '{call.name}'{why}."
            results.append(ToolResult(call=call, observation=text, success=False))
        calls.append(call)
    decided = set(verdicts)
    pending = tuple(i for i in memory.pending_approval if i not in decided)
    return memory.model_copy(
        update={
            "planned_calls": tuple(calls),
            "results": tuple(results),
            "pending_approval": pending,
            "decisions": memory.decisions + fact.decisions,
            "approval_reason": memory.approval_reason if pending else "approval",
            "in_flight": tuple(i for i in memory.in_flight if i not in decided),
        }
    )


@_reduce.register
def _(fact: f.ToolExecuted, memory: AgentMemory) -> AgentMemory:
    result = ToolResult(call=fact.call, observation=fact.observation, success=fact.success)
    in_flight = tuple(i for i in memory.in_flight if i != fact.call.id)
    return memory.model_copy(update={"results": (*memory.results, result), "in_flight": in_flight})


@_reduce.register
def _(fact: f.ObservationCommitted, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(
        update={
            "history": memory.history + fact.entries,
            "history_digest": _chain(memory.history_digest, fact.entries),
            "planned_calls": (),
            "parallel": False,
            "planned_text": None,
            "results": (),
            "rejected": (),
            "refused_answers": (),
            "pending_approval": (),
            "decisions": (),
            "in_flight": (),
        }
    )


@_reduce.register
def _(fact: f.HistoryCompressed, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(
        update={
            "history": (fact.summary,),
            "history_digest": _chain("", (fact.summary,)),
            "retry_count": 0,
        }
    )


@_reduce.register
def _(fact: f.AnswerRejected, memory: AgentMemory) -> AgentMemory:
    refused = (*memory.refused_answers, (fact.content, fact.reason))
    return memory.model_copy(update={"refused_answers": refused})


@_reduce.register
def _(fact: f.FinalAnswerProduced, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(update={"final_answer": fact.content})


@_reduce.register
def _(fact: f.RunFailed, memory: AgentMemory) -> AgentMemory:
    return memory.model_copy(update={"error": fact.message})


def fold(facts: Iterable[Any]) -> AgentMemory:
    """Memory after every fact of a run, in order; the first fact must be RunStarted."""
    return fold_with_state(facts)[0]


def fold_with_state(facts: Iterable[Any]) -> tuple[AgentMemory, str]:
    """Memory and current state after every fact of a run."""
    iterator = iter(facts)
    first = next(iterator, None)
    if not isinstance(first, f.RunStarted):
        raise ValueError(
            f"A run's log must begin with RunStarted, not {first!r}; this is not a complete run."
        )
    memory = initial_memory(first)
    state: str = State.Idle
    for fact in iterator:
        memory = apply(memory, fact)
        if isinstance(fact, f.Transitioned):
            state = as_state(fact.to_state)
    return memory, state
