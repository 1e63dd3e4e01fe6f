"""Sub-agents: a tool that runs another agent as a child run in the same store.

`AgentBuilder.subagent(name, description, child)` adds a `SubAgentTool`. Its argument is the
child's task (`{"task": "..."}`); the child has its own prompt, tools, LLM and limits (whatever
its builder sets) and runs as a run of its own in the parent's store, with an id derived from
the parent run and the call's place in it (`PARENT-STEP-POSITION`, the call's idempotency key,
never the LLM's call id). The child's definition (`RunStarted.parent_call`) and its catalog
entry (`parent_id`, `branch_seq` = the seq of the call's start, `info["subagent"]`) link it to
the call. What the parent observes:

- the child's final answer (`SUCCESS: ...`);
- a failed child (max steps, budget, an LLM error: `AgentFailed`) or a stopped one (an engine
  error) as a failed observation, `ERROR: SubAgentFailed: ...` (failure is data);
- a child waiting for a human: the call's outcome is unknown, so nothing is recorded as its
  result and the parent waits in WaitingForHuman (`outcome_unknown`). Decide the child's calls
  (`agentsm approve CHILD`), then approve the parent's call and resume the parent: the call
  goes on with the same child run.

The call is idempotent: a parent resumed after its process died while the child ran calls it
again, which attaches to the child run by its id and continues it (or, if the child had
finished, observes its recorded outcome); no second child is started. With `share_budget`, the
child's budget is what the parent has left (the smaller of that and the child's own), and the
child's token usage is recorded on the parent's `ToolExecuted` (`usage`), which the parent's
fold adds to its `total_usage`: a child that spends the budget stops the parent at its next
step through the usual budget check. Replay of the parent serves the child's recorded answer
(no child runs); `replay_run(..., children=True)` replays the children too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from eventstore import ConcurrencyError, EventStore, NewEvent, RunInUse, RunRecord, UnknownRun

from . import facts as f
from .catalog import summary_of
from .errors import AgentFailed, EngineError, HumanInputRequired
from .facts import FACTS
from .marks import subagent_of
from .memory import AgentMemory, fold_log, fold_with_state, initial_memory
from .reading import decode
from .recorder import encode_meta
from .tool_context import ToolContext, call_key
from .tools import Tool, ToolOutcome
from .types import ApprovalRequest, ParentCall, State, TokenBudget, TokenUsage

if TYPE_CHECKING:
    from .builder import AgentBuilder

__all__ = ["TASK_SCHEMA", "SubAgentTool", "children_of", "subagent_of", "with_waiting_children"]

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "The task for the sub-agent, in full."}
    },
    "required": ["task"],
    "additionalProperties": False,
}
"""The arguments of every sub-agent tool: the child's task."""


class SubAgentTool(Tool):
    """A tool that runs a child agent on the task it is given and observes its answer.

    Made by `AgentBuilder.subagent`; `parent` is the builder of the agent that calls it (whose
    store the child runs in), `child` the child's builder or a function `task -> builder`. The
    parent makes the child's builder for each task (this module imports no builder).
    """

    def __init__(
        self,
        parent: AgentBuilder,
        name: str,
        description: str,
        child: AgentBuilder | Callable[[str], AgentBuilder],
        *,
        share_budget: bool = False,
        timeout: float | None = None,
    ) -> None:
        make = parent._child_builders(name, child)
        super().__init__(
            name, description, dict(TASK_SCHEMA), self._run, idempotent=True, timeout=timeout
        )
        self.parent = parent
        self.child = child
        self.share_budget = share_budget
        self._make = make

    def builder_for(self, task: str) -> AgentBuilder:
        """The child's builder for `task`: a copy of the child builder with this task, or what
        the child function returns for it; either way under the parent's redaction hooks."""
        return self._redacting(self._make(task))

    def _redacting(self, made: AgentBuilder) -> AgentBuilder:
        """`made` with the parent's redaction hooks before its own: the child's task and
        answer are the parent's call and result, and its log may hold no more than the
        parent's (the child's run records their labels too)."""
        own = list(made._redactions)
        made._redactions = [h for h in self.parent._redactions if h not in own] + own
        return made

    def bound_to(self, parent: AgentBuilder) -> SubAgentTool:
        """The same sub-agent, called by the agent `parent` builds."""
        return SubAgentTool(
            parent,
            self.name,
            self.description,
            self.child,
            share_budget=self.share_budget,
            timeout=self.timeout,
        )

    async def _run(self, args: dict[str, Any]) -> ToolOutcome:
        context = ToolContext.current()
        store = self.parent.event_store
        if context is None or not context.run_id or store is None:
            return ToolOutcome.failed(
                "SubAgentUnavailable",
                f"sub-agent '{self.name}' runs only as a call of an agent run",
            )
        task = str(args.get("task", ""))
        if not task.strip():
            return ToolOutcome.failed("InvalidArguments", "args.task: give the sub-agent a task")
        child_id = context.idempotency_key
        link = ParentCall(
            run_id=context.run_id,
            seq=context.seq,
            step=context.step,
            position=context.position,
            tool=self.name,
        )
        record = _record(store, child_id)
        if record is None:
            builder = self.builder_for(task).parent_call(link).store(store).run_id(child_id)
            if self.share_budget:
                left = _tokens_left(store, context.run_id)
                if left is not None and left <= 0:
                    return ToolOutcome.failed(
                        "BudgetExceeded",
                        f"no tokens of the shared budget are left for sub-agent '{self.name}'",
                    )
                own = builder._budget
                if left is not None and (own is None or own.max_total_tokens > left):
                    builder.budget(TokenBudget(max_total_tokens=left))
            _create(store, builder, child_id, link)
        elif subagent_of(record) != self.name or record.parent_id != context.run_id:
            return ToolOutcome.failed(
                "SubAgentUnavailable",
                f"run {child_id} exists already and is not this call's sub-agent run",
            )
        else:
            finished = await _claimed_or_finished(store, child_id)
            if finished is not None:
                return self._observed(child_id, *finished)
            builder = self.builder_for(record.task).store(store)
        engine = builder.attach(child_id)
        try:
            await engine.arun()
        except AgentFailed:
            pass
        except HumanInputRequired as e:
            names = ", ".join(r.call.name for r in e.requests)
            return ToolOutcome.unknown(
                "SubAgentWaiting",
                f"sub-agent run {child_id} waits for a human decision on {names}; decide it "
                f"(agentsm approve {child_id}), then approve this call to continue it",
            )
        except EngineError as e:
            return self._observed(child_id, None, f"{type(e).__name__}: {e}", engine.memory)
        finally:
            store.release(child_id)  # whatever happened: the child is no longer driven here
        memory = engine.memory
        return self._observed(child_id, memory.final_answer, memory.error, memory)

    def _observed(
        self, child_id: str, answer: str | None, error: str | None, memory: AgentMemory
    ) -> ToolOutcome:
        usage: TokenUsage | None = memory.total_usage if self.share_budget else None
        if error is not None or answer is None:
            outcome = ToolOutcome.failed(
                "SubAgentFailed", f"sub-agent run {child_id} failed: {error or 'no answer'}"
            )
        else:
            outcome = ToolOutcome.ok(answer)
        return ToolOutcome(outcome.observation, outcome.success, outcome.error_type, usage=usage)

    def __repr__(self) -> str:
        shared = " share_budget" if self.share_budget else ""
        return f"<SubAgentTool {self.name!r}{shared}>"


def _record(store: EventStore, run_id: str) -> RunRecord | None:
    try:
        return store.run(run_id)
    except UnknownRun:
        return None


def _tokens_left(store: EventStore, run_id: str) -> int | None:
    """What is left of a run's token budget, as its log says (None: it has no budget)."""
    memory, _ = fold_log(store, run_id)
    if memory.budget is None:
        return None
    return memory.budget.max_total_tokens - memory.total_usage.total_tokens


def _finished(store: EventStore, run_id: str) -> tuple[str | None, str | None, AgentMemory] | None:
    """(answer, error, memory) of a child run that reached its end, else None."""
    facts = [decode(e) for e in store.read(run_id)]
    if not facts or not isinstance(facts[-1], f.RunFinished):
        return None
    memory, state = fold_with_state(facts)
    if state == State.Done:
        return memory.final_answer, None, memory
    return None, memory.error or "Unknown error", memory


async def _claimed_or_finished(
    store: EventStore, run_id: str
) -> tuple[str | None, str | None, AgentMemory] | None:
    """The outcome of a child run that ended; else claim it for this process to continue it
    (None). While another live process drives it (a worker took it up), wait for it to end
    or to be let go (the sub-agent call's timeout bounds the wait)."""
    while True:
        finished = _finished(store, run_id)
        if finished is not None:
            return finished
        try:
            store.claim(run_id)
        except RunInUse:
            await asyncio.to_thread(store.wait_for_append, 1.0)
            continue
        finished = _finished(store, run_id)  # it may have ended just before the claim
        if finished is not None:
            store.release(run_id)
        return finished


def _create(store: EventStore, builder: AgentBuilder, run_id: str, link: ParentCall) -> None:
    """Enter the child run in the catalog, linked to the parent's call, with its definition
    (in one transaction, as any run); a child created meanwhile by another driver is kept."""
    definition = builder.build().definition
    clock = builder._clock
    now = clock()
    event = NewEvent(
        definition.kind,
        FACTS.encode(definition),
        encode_meta(State.Idle, 0),
        now,
        FACTS.version(definition.kind),
    )
    try:
        store.create_run(
            run_id,
            definition.task,
            parent_id=link.run_id,
            branch_seq=link.seq,
            info={"subagent": {"parent": link.run_id, "tool": link.tool}},
            created_at=now,
            events=[event],
            status="created",
            summary=summary_of(initial_memory(definition)),
        )
    except ConcurrencyError:
        pass  # another process created it first: attach to that one


def children_of(store: EventStore, run_ids: Iterable[str]) -> list[RunRecord]:
    """The sub-agent runs started by calls of these runs (not their branches), oldest first."""
    return [r for r in store.runs(parents=list(run_ids)) if subagent_of(r) is not None]


def with_waiting_children(
    store: EventStore, requests: Iterable[ApprovalRequest]
) -> list[ApprovalRequest]:
    """The requests, each about a sub-agent call whose child run has not finished saying so
    (the child's id and what to decide first) instead of asking whether the call took effect:
    such a call came back without an outcome because its child waits, not because it died."""
    explained = []
    for request in requests:
        child_id = call_key(request.run_id, request.step, request.index)
        record = _record(store, child_id)
        if (
            record is not None
            and record.parent_id == request.run_id
            and subagent_of(record) == request.call.name
            and record.status not in ("done", "failed")
        ):
            first = (
                f"decide it first (agentsm approve {child_id}), then approve"
                if record.status == "waiting"
                else "approve"
            )
            reason = (
                f"its sub-agent run {child_id} has not finished (status {record.status}): "
                f"{first} this call to continue it, or reject it to leave the child as it is"
            )
            request = request.model_copy(update={"reason": reason})
        explained.append(request)
    return explained
