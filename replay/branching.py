"""Branch: continue a recorded run from one of its points, with a change, as a new run.

The model, the same for `branch_run`, `agentsm branch` and the viewer: after the point, a
recorded LLM response or tool result of the parent is reused only where the branch makes the
same request at the same place (`replay.branchsources`); elsewhere it goes live where the user
allowed it (`llm`, `live_tools`), and otherwise stops there and says what it would need. The
result (`BranchResult`) says which effects were given, reused, live or needed."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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
from agentsm.recorder import RIDERS, encode_meta
from eventstore import EventStore, NewEvent
from eventstore.records import with_riders

from .branchnotes import UnusedChange, moved_point, refused_answers, unused_changes
from .branchsources import (
    BranchEffect,
    BranchLlm,
    BranchTools,
    LiveNeeded,
    RecordedCall,
    Sources,
    Surface,
)
from .effects import RecordedDecisions, RecordedValues
from .errors import ReplayError
from .recording import Recording
from .source import Builder, StoreLike, agent_of, opened, recorded_builder

__all__ = ["Branch", "BranchResult", "agent_llm", "branch_run", "judged", "start_branch"]


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
    live_tools: bool = False,
    on_live_tool: Callable[[ToolCall], None] | None = None,
) -> BranchResult:
    """Start a new run from the parent's facts up to the last complete transition at or before
    seq `at`, apply the changes, continue it as far as it may go, and say what it did.

    Changes: `llm_response` answers the branch's next LLM call; `tool_result` is the result of
    its next tool run; `config` replaces the configuration from there; `llm` answers every LLM
    call from the point on (a live LLM). Past the change, the parent's recorded LLM responses
    and tool results are reused only where the request is the same (an LLM call's purpose,
    model, messages and tools; a tool run's tool and arguments, at the same place). A request
    that differs goes to `llm`, and a tool call to the builder's tools with `live_tools=True`
    (`on_live_tool` is told of each); where neither is allowed the branch stops there, status
    "stopped", and its result says what it needed. Nothing goes live unless asked: an LLM
    costs money, a tool may act on the world. Decisions come from the parent where they are
    about the same calls, else from the builder's approval callback, else the branch waits.

    A change nothing after the point used (no LLM call or tool run came, or the answer became
    a reflection summary) is reported with an `UnusedChange` warning: the branch then repeats
    its parent."""
    if live_tools and builder is None:
        raise ReplayError(
            "live_tools=True runs your agent's real tools, and only your builder has them: "
            "pass builder= (the function that makes your AgentBuilder) too."
        )
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
        result = branch.result()
    for note in result.unused:
        warnings.warn(UnusedChange(note), stacklevel=2)  # the branch repeats its parent
    return result


@dataclass(frozen=True)
class BranchResult:
    """What a branch did: its run, how it ended (`status`: done, failed, waiting, stopped,
    ...), where it started (`point`, which is `at` unless that seq was inside a transition:
    `moved`), and where each LLM response and tool result after the point came from
    (`effects`; `given`, `reused`, `live`, `needed`). A branch that `needed` an effect it was
    not allowed stopped there; `notes` are what else its user should know."""

    run_id: str
    parent_id: str
    at: int
    point: int
    status: str
    answer: str | None
    error: str | None
    changes: tuple[str, ...]
    effects: tuple[BranchEffect, ...]
    notes: tuple[str, ...] = ()
    unused: tuple[str, ...] = ()
    """The changes nothing after the point used (also warned as `UnusedChange`)."""

    @property
    def moved(self) -> bool:
        """Whether the branch starts at another seq than the one asked for."""
        return self.point != self.at

    def _of(self, source: str) -> tuple[BranchEffect, ...]:
        return tuple(e for e in self.effects if e.source == source)

    @property
    def given(self) -> tuple[BranchEffect, ...]:
        return self._of("given")

    @property
    def reused(self) -> tuple[BranchEffect, ...]:
        return self._of("reused")

    @property
    def live(self) -> tuple[BranchEffect, ...]:
        return self._of("live")

    @property
    def needed(self) -> tuple[BranchEffect, ...]:
        return self._of("needed")

    def said(self, surface: Surface = "python", *, brief: bool = False) -> str:
        """What it ended with: what it needs (stopped; `brief`: without why and what to pass),
        else its answer or error, else ""."""
        if self.needed:
            return "; ".join(e.need(surface, brief=brief) for e in self.needed)
        return self.answer or self.error or ""

    def outcome(self, surface: Surface = "python") -> str:
        """How it ended, in one line: status, then what it needs, its answer or its error."""
        said = self.said(surface)
        return self.status + (f": {said}" if said else "")

    def lines(self, surface: Surface = "python") -> list[str]:
        """Where it started, then one line per effect after the point (see `BranchEffect`)."""
        start = f"from {self.parent_id} at seq {self.point}"
        if self.moved:
            start += f" ({moved_point(self.at, self.point)})"
        return [start, *(e.line(surface) for e in self.effects)]

    def to_dict(self, surface: Surface = "python") -> dict[str, Any]:
        """As JSON: the fields, each effect with its line, and what it needs (sentences)."""
        return {
            "run_id": self.run_id,
            "parent_id": self.parent_id,
            "at": self.at,
            "point": self.point,
            "moved": self.moved,
            "status": self.status,
            "answer": self.answer,
            "error": self.error,
            "changes": list(self.changes),
            "effects": [{**e.to_dict(), "line": e.line(surface)} for e in self.effects],
            "needs": [e.need(surface) for e in self.needed],
            "notes": [*self.notes, *self.unused],
        }

    def __str__(self) -> str:
        return "\n".join([f"branch {self.run_id}: {self.outcome()}", *self.lines()])

    def __repr__(self) -> str:
        counts = ", ".join(
            f"{source}={len(self._of(source))}" for source in ("given", "reused", "live", "needed")
        )
        return (
            f"BranchResult(run_id={self.run_id!r}, status={self.status!r}, point={self.point}, "
            f"{counts})"
        )


@dataclass(frozen=True)
class Branch:
    """A branch recorded up to its RunBranched fact, with the engine that continues it: what
    `branch_run` drives alone and best-of-N drives with its siblings on one event loop."""

    run_id: str
    engine: AgentEngine
    changes: tuple[str, ...]
    parent_id: str
    at: int
    point: int
    sources: Sources

    async def drive(self) -> BaseException | None:
        """Continue the branch to its end (or until it waits, or stops where it needs a live
        effect); its outcome is in its log. An ending that is data (failed, aborted, waiting,
        stopped) comes back as the error, not raised."""
        try:
            await self.engine.arun()
        except (AgentFailed, HumanInputRequired, EngineError, LiveNeeded) as e:
            return e
        return None

    def unused(self) -> list[str]:
        """One sentence per change of the branch that nothing after its point used."""
        entries = Recording.load(self.engine.store, self.run_id).entries
        return unused_changes(self.run_id, entries, self.changes)

    def result(self) -> BranchResult:
        """What the branch did, from its log and where its effects came from."""
        store = self.engine.store
        entries = Recording.load(store, self.run_id).entries
        memory = self.engine.memory
        return BranchResult(
            run_id=self.run_id,
            parent_id=self.parent_id,
            at=self.at,
            point=self.point,
            status=store.run(self.run_id).shown_status,
            answer=memory.final_answer,
            error=memory.error,
            changes=self.changes,
            effects=tuple(self.sources.effects),
            notes=tuple(refused_answers(entries)),
            unused=tuple(unused_changes(self.run_id, entries, self.changes)),
        )

    def __repr__(self) -> str:
        return f"Branch(run_id={self.run_id!r}, changes={self.changes!r})"


def _llm_calls(parent: Recording, point: int) -> list[RecordedCall]:
    """The parent's LLM calls after `point` that came back (answered or failed), in order: a
    call its process died in was made again when it resumed, and is left out."""
    calls = []
    asked: tuple[int, f.LlmRequested] | None = None
    for e in parent.of(f.LlmRequested, f.LlmResponded, f.LlmFailed):
        if isinstance(e.fact, f.LlmRequested):
            asked = (e.seq, e.fact) if e.seq > point else None
        elif isinstance(e.fact, f.LlmResponded | f.LlmFailed) and asked is not None:
            calls.append(RecordedCall(asked[0], asked[1], e.fact))
            asked = None
    return calls


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
    live_tools: bool = False,
    on_live_tool: Callable[[ToolCall], None] | None = None,
    also_changed: Sequence[str] = (),
) -> Branch:
    """Record a new branch of `run_id` (the parent's prefix and the RunBranched fact naming
    the changes, with `also_changed` among them) and return it with its engine, not yet
    driven. The arguments are `branch_run`'s (tools run live only with a builder)."""
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
    new_id = new_run_id or uuid.uuid4().hex[:12]
    sources = Sources(store, new_id)
    first = ToolOutcome.ok(tool_result) if isinstance(tool_result, str) else tool_result
    calls = _llm_calls(parent, point)
    agent.llm(BranchLlm(calls, sources, given=llm_response, live=llm))
    agent.store(store).mcp_recorded(parent.definition)
    live = agent.build()  # the builder's own tools and approval callback, where allowed
    tools = [  # what the parent's later tool runs reported (a stop or a timeout is not served)
        e
        for e in parent.tool_effects[parent.tool_runs_before(point) :]
        if e.outcome is not None and e.outcome.known
    ]
    runner = live.run_tool if live_tools and builder is not None else None
    agent.tool_runner(BranchTools(tools, sources, given=first, live=runner, on_live=on_live_tool))
    later_groups = [g for g in parent.decision_groups if g and g[0].seq > point]
    agent.on_approval(RecordedDecisions(later_groups, live.approval))
    agent.values(RecordedValues([d for _, d in parent.draws[parent.draws_before(point) :]]))

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
    engine.observe(sources)
    engine.note(
        f.RunBranched(
            parent_id=parent.run_id,
            parent_seq=point,
            changes=changes,
            config=config,
            tool_result=first.observation if first is not None else None,
        )
    )
    return Branch(new_id, engine, changes, parent.run_id, at, point, sources)


def agent_llm(store: EventStore, run_id: str, builder: Builder) -> LlmCaller:
    """The LLM of the user's agent for a run (a sub-agent run's own, given its parent's
    builder): what `agentsm branch --live` and the viewer's live branch give as `llm`."""
    definition = Recording.load(store, run_id, upto=1).definition
    agent = agent_of(store, definition, builder)(definition.task)
    return agent.llm_caller or agent.build().llm  # without listing MCP tools, if it has one


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
        events=with_riders(events, RIDERS),  # packed as the parent's rows were
        status="running",
        claim=True,  # driven from here on: no worker takes it before the branch goes on
    )
