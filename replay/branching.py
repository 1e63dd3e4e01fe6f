"""Branch: continue a recorded run from one of its points, with a change, as a new run."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentsm import (
    AgentConfig,
    AgentEngine,
    AgentFailed,
    EngineError,
    HumanInputRequired,
    LlmCaller,
    LlmResponse,
    ToolCall,
    ToolOutcome,
)
from agentsm import facts as f
from agentsm._sync import run_sync
from agentsm.facts import FACTS
from agentsm.memory import AgentMemory, apply, as_stored, initial_memory
from agentsm.recorder import encode_meta
from eventstore import EventStore, NewEvent

from .branchnotes import UnusedChange, unused_changes
from .effects import RecordedDecisions, RecordedLlm, RecordedTools, RecordedValues
from .errors import ReplayError
from .recording import Recording
from .source import Builder, StoreLike, agent_of, opened, recorded_builder

__all__ = ["Branch", "branch_run", "judged", "start_branch"]


def branch_run(
    db: StoreLike,
    run_id: str,
    at: int,
    *,
    llm_response: LlmResponse | None = None,
    tool_result: str | ToolOutcome | None = None,
    config: AgentConfig | None = None,
    llm: LlmCaller | None = None,
    builder: Builder | None = None,
    new_run_id: str | None = None,
    live_tools: bool = True,
    on_live_tool: Callable[[ToolCall], None] | None = None,
) -> str:
    """Start a new run from the parent's facts up to the last complete transition at or before
    seq `at`, apply the changes, continue it to its end, and return its id.

    `llm_response` answers the branch's next LLM call; `tool_result` is the result of its next
    tool call; `config` replaces the configuration from there; `llm` answers every later call
    (otherwise the parent's remaining recorded responses do). Tools, decisions: the parent's
    recorded ones after the branch point, by position, while they are about the same calls
    (tool and arguments); other calls go to the builder's own tools and approval callback
    (without a builder, or with `live_tools=False`, tools come back as `ERROR: NotRecorded`;
    `on_live_tool` is told of each call run live). A change nothing after the
    point used (no LLM call or tool run came, or the answer became a reflection summary) is
    reported with an `UnusedChange` warning: the branch then repeats its parent.
    """
    with opened(db) as store:
        branch = start_branch(
            store,
            run_id,
            at,
            llm_response=llm_response,
            tool_result=tool_result,
            config=config,
            llm=llm,
            builder=builder,
            new_run_id=new_run_id,
            live_tools=live_tools,
            on_live_tool=on_live_tool,
        )
        run_sync(branch.drive())
        for note in branch.unused():
            warnings.warn(UnusedChange(note), stacklevel=2)  # the branch repeats its parent
    return branch.run_id


@dataclass(frozen=True)
class Branch:
    """A branch recorded up to its RunBranched fact, with the engine that continues it: what
    `branch_run` drives alone and best-of-N drives with its siblings on one event loop."""

    run_id: str
    engine: AgentEngine
    changes: tuple[str, ...]

    async def drive(self) -> BaseException | None:
        """Continue the branch to its end (or until it waits); its outcome is in its log. An
        ending that is data (failed, aborted, waiting) comes back as the error, not raised."""
        try:
            await self.engine.arun()
        except (AgentFailed, HumanInputRequired, EngineError) as e:
            return e
        return None

    def unused(self) -> list[str]:
        """One sentence per change of the branch that nothing after its point used."""
        entries = Recording.load(self.engine.store, self.run_id).entries
        return unused_changes(self.run_id, entries, self.changes)

    def __repr__(self) -> str:
        return f"Branch(run_id={self.run_id!r}, changes={self.changes!r})"


def start_branch(
    store: EventStore,
    run_id: str,
    at: int,
    *,
    llm_response: LlmResponse | None = None,
    tool_result: str | ToolOutcome | None = None,
    config: AgentConfig | None = None,
    llm: LlmCaller | None = None,
    builder: Builder | None = None,
    new_run_id: str | None = None,
    live_tools: bool = True,
    on_live_tool: Callable[[ToolCall], None] | None = None,
    also_changed: Sequence[str] = (),
) -> Branch:
    """Record a new branch of `run_id` (the parent's prefix and the RunBranched fact naming
    the changes, with `also_changed` among them) and return it with its engine, not yet
    driven. The arguments are `branch_run`'s."""
    parent = Recording.load(store, run_id)
    if judged(parent):
        raise ReplayError(
            f"Run {parent.run_id} is a best-of judgement, not an agent run: branch its parent "
            f"{parent.run.parent_id} or one of its candidates instead."
        )
    point = parent.branch_point(at)
    agent = (
        agent_of(store, parent.definition, builder)(parent.definition.task)
        if builder is not None
        else recorded_builder(parent.definition)
    )
    later: Sequence[f.LlmResponded | f.LlmFailed | LlmResponse] = [
        o for o in parent.llm_outcomes[parent.llm_calls_before(point) :] if o is not None
    ]
    if llm is not None:
        later = []
    if llm_response is not None:
        later = [llm_response, *later[1:]]
    first = ToolOutcome.ok(tool_result) if isinstance(tool_result, str) else tool_result
    agent.llm(RecordedLlm(later, then=llm)).store(store).mcp_recorded(parent.definition)
    live = agent.build()  # the builder's own tools and approval callback, for what is not recorded
    tools = [  # what the parent's later tool runs reported (a stop or a timeout is not served)
        e
        for e in parent.tool_effects[parent.tool_runs_before(point) :]
        if e.outcome is not None and e.outcome.known
    ]

    async def run_live(call: ToolCall) -> ToolOutcome:
        if on_live_tool is not None:
            on_live_tool(call)
        return await live.run_tool(call)

    agent.tool_runner(RecordedTools(tools, run_live if live_tools else None, first=first))
    later_groups = [g for g in parent.decision_groups if g and g[0].seq > point]
    agent.on_approval(RecordedDecisions(later_groups, live.approval))
    agent.values(RecordedValues([d for _, d in parent.draws[parent.draws_before(point) :]]))

    new_id = new_run_id or uuid.uuid4().hex[:12]
    copy_prefix(parent, store, new_id, point, parent_id=parent.run_id)
    changes = tuple(
        name
        for name, value in (
            ("llm_response", llm_response),
            ("tool_result", tool_result),
            ("config", config),
            ("llm", llm),
        )
        if value is not None
    )
    changes += tuple(name for name in also_changed if name not in changes)
    engine = agent.attach(new_id)
    engine.note(
        f.RunBranched(
            parent_id=parent.run_id,
            parent_seq=point,
            changes=changes,
            config=config,
            tool_result=first.observation if first is not None else None,
        )
    )
    return Branch(new_id, engine, changes)


def judged(recording: Recording) -> bool:
    """Whether a run is a best-of judgement (its second fact gathers candidates), whose log
    holds no agent to replay, branch or resume."""
    return len(recording.entries) > 1 and isinstance(
        recording.entries[1].fact, f.CandidatesGathered
    )


def copy_prefix(
    parent: Recording, target: EventStore, run_id: str, upto: int, *, parent_id: str
) -> None:
    """Copy a run's facts up to seq `upto`, envelopes included, into a new child run, in one
    transaction (the child never exists without them)."""
    events = []
    memory: AgentMemory | None = None
    for e in parent.entries:
        if e.seq > upto:
            break
        fact: f.Fact = e.fact
        if memory is None:
            memory = initial_memory(parent.definition)
        else:  # a call named by its place is written by its place alone, as recorded
            fact = as_stored(fact, memory)
            memory = apply(memory, e.fact)
        envelope = {"state": e.state, "step": e.step}
        events.append(
            NewEvent(
                e.event,
                FACTS.encode(fact, envelope),
                encode_meta(e.state, e.step, e.metrics, custom=e.event not in FACTS.builtin),
                e.timestamp,
                FACTS.version_of(fact),
            )
        )
    target.create_run(
        run_id,
        parent.run.task,
        parent_id=parent_id,
        branch_seq=upto,
        info=dict(parent.run.info),
        events=events,
        status="running",
        claim=True,  # driven from here on: no worker takes it before the branch goes on
    )
