"""Replay: re-run a recorded run with the current code against its own recorded effects."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from agentsm import (
    AgentBuilder,
    AgentEngine,
    AgentFailed,
    AgentMemory,
    EngineError,
    HumanInputRequired,
    LlmResponse,
    ToolRegistry,
)
from agentsm import facts as f
from agentsm._sync import run_sync
from agentsm.errors import RunStopped
from agentsm.facts import FACTS
from agentsm.llm.base import llm_settings
from agentsm.subagent import SubAgentTool, children_of
from agentsm.trace import TraceEntry, bulk_reading, entries
from eventstore import EventStore, RunRecord, UnknownRun

from .branching import judged
from .effects import (
    RecordedDecisions,
    RecordedLlm,
    RecordedMessages,
    RecordedTools,
    RecordedValues,
    ReplayDiverged,
    ReplayedCrash,
    _same_call,
)
from .hooked import RecordedHooks
from .judging import replay_judgement
from .recording import Recording, ToolEffect
from .report import ReplayReport
from .scratch import ScratchStore
from .source import Builder, StoreLike, opened, recorded_builder

__all__ = ["assert_replays", "replay_run"]


def replay_run(
    db: StoreLike,
    run_id: str,
    builder: Builder | None = None,
    *,
    execute_tools: bool = False,
    children: bool = False,
) -> ReplayReport:
    """Re-run `run_id` with the current agent (`builder(task)`, or the recorded definition)
    against its recorded LLM responses, tool results and human decisions, in a scratch store,
    and compare every fact with the recording. The recorded run is only read. A branched run is
    replayed from its start too, its recorded changes re-applied where it was branched.

    Effects are matched by their place in the run: the n-th LLM call or tool run is served the
    n-th recorded one, checked to be the same call (tool and arguments); each time the run asks
    a human, the next recorded group of decisions answers, each by the call's position (in
    whatever order the calls were decided); a mismatch stops the replay at a divergence.
    `execute_tools` runs the tools instead of serving their results (except results a branch
    set, and runs the recorded process died in, which stop the replay there as they did).
    A best-of judgement replays as `replay_judgement` (its recorded verdict served back).

    A sub-agent call is a tool run like any other: its recorded answer is served and no child
    runs. `children` replays the run's sub-agent runs too (and theirs), each against its own
    recording with the child agent the builder's sub-agent tool makes (or its recorded
    definition, without a builder); their reports are the report's `children`. A sub-agent
    run replayed on its own with its parent's builder replays with that child agent too."""
    with opened(db) as store:
        agent = _agent_for(store, run_id, builder)
        if execute_tools:  # the tools are the user's code: the cyclic collector runs as usual
            return _replay(store, run_id, agent, execute_tools, children)
        # The collector is paused until the replay's objects are freed (when `_replay`
        # returns): the recording, the replayed facts and the engine's memory are many
        # long-lived objects that its collections would go through again and again, for
        # nothing (a replay leaves a few dozen objects in cycles, whatever the run's length).
        with bulk_reading():
            return _replay(store, run_id, agent, execute_tools, children)


def _agent_for(store: EventStore, run_id: str, builder: Builder | None) -> Builder | None:
    """`builder`, or, for a sub-agent run given its parent's builder, the child agent that the
    parent's sub-agent tool makes (with what the recording fixed when the child started)."""
    if builder is None:
        return None
    link = Recording.load(store, run_id, upto=1).definition.parent_call
    if link is None:
        return builder
    try:
        parent_task = Recording.load(store, link.run_id, upto=1).definition.task
    except (UnknownRun, ValueError):
        return builder  # the parent is not in this log
    return _child_builder(builder(parent_task), store, run_id) or builder


def _replay(
    store: EventStore,
    run_id: str,
    builder: Builder | None,
    execute_tools: bool,
    children: bool,
) -> ReplayReport:
    recording = Recording.load(store, run_id)
    if judged(recording):  # a best-of judgement: its judge asked again, its answer served
        return replay_judgement(store, recording.run_id)
    definition = recording.definition
    agent = (
        builder(definition.task)
        if builder is not None
        else recorded_builder(definition, recording.run_id)
    )
    if any(e.event in FACTS.versions for e in recording.of(f.UnknownFact)):
        recording = Recording.load(store, run_id)  # the builder registered the user's facts
    agent.mcp_recorded(definition)  # MCP servers that are not running offer recorded tools
    scratch = ScratchStore()  # the replayed facts are compared, never kept
    own = agent.llm_caller  # the user's LLM, if the builder sets one: its settings count
    settings = llm_settings(own) if own is not None else definition.llm
    seen = _Seen()
    llm = _Asked(recording.llm_outcomes, settings=settings, seen=seen)
    agent.llm(llm)
    agent.store(scratch).run_id(recording.run_id)
    decisions = RecordedDecisions(
        recording.decision_groups, strict=True, answers=_answers(recording)
    )
    agent.on_approval(decisions)
    agent.messages(RecordedMessages(recording.heard))  # steered and stopped where recorded
    agent.hook_effects(RecordedHooks(recording.entries))  # guards and hooks: what they did
    live = agent.build().run_tool if execute_tools else None
    effects = _as_the_agent_would(_pins_inherited(store, recording), definition, agent)
    agent.tool_runner(RecordedTools(effects, live, strict=True, execute=execute_tools))
    agent.patches(recording.patches.__contains__)  # old runs replay their old code paths
    agent.values(RecordedValues([d for _, d in recording.draws], strict=True))
    engine = agent.build()
    seen.engine = engine
    notes = recording.of(f.RunBranched)
    last = recording.run.last_seq
    while True:
        try:
            decisions.paused = False
            _drive(engine, notes)
            if not engine.finished and _stopped_while_waiting(engine, scratch, recording):
                continue  # a stop was recorded while it waited, then it was answered
            if decisions.paused and not engine.finished:
                continue  # it waits where the recorded run took its next decisions later
            if _last_kind(scratch, recording.run_id) not in _RESUMED_AFTER:
                break
        except ReplayedCrash:
            pass
        except ReplayDiverged:
            break  # the facts compared below show where
        # the recorded run stopped here (died, or aborted at an LLM deadline) and was resumed
        if scratch.run(recording.run_id).last_seq >= last:
            break  # ... or it was never resumed
        engine = agent.attach(recording.run_id)
        seen.engine = engine
    if recording.same_as_written(scratch.written(recording.run_id)):
        report = ReplayReport(recording.run_id, len(recording.entries), None)
    else:  # the facts, read as the recording was, compared one by one
        report = recording.compare(_replayed(scratch, recording), views=llm.views)
    if not children:
        return report
    family = tuple(
        _replay(
            store,
            child.run_id,
            _child_builder(agent, store, child.run_id) if builder is not None else None,
            execute_tools,
            True,
        )
        for child in sorted(children_of(store, [recording.run_id]), key=_call_seq)
    )
    return dataclasses.replace(report, children=family)


def _call_seq(record: RunRecord) -> tuple[int, float]:
    return record.branch_seq or 0, record.created_at


def _child_builder(parent: AgentBuilder, store: EventStore, child_id: str) -> Builder | None:
    """The child agent of a recorded sub-agent run, as the parent's sub-agent tool makes it
    today, with what the recording fixed when it started (its link to the parent's call, and
    the shared budget, which depended on the parent's usage then). None when the parent agent
    has no such sub-agent tool any more: the child replays with its recorded definition."""
    definition = Recording.load(store, child_id, upto=1).definition
    link = definition.parent_call
    made = parent.tools.get(link.tool) if link is not None else None
    if not isinstance(made, SubAgentTool):
        return None
    tool = made

    def build(task: str) -> AgentBuilder:
        child = tool.builder_for(task).parent_call(link)
        if tool.share_budget and definition.budget is not None:
            child.budget(definition.budget)
        return child

    return build


def _pins_inherited(store: EventStore, recording: Recording) -> tuple[ToolEffect, ...]:
    """The run's tool runs, a result its branch reused from the parent pinned where the
    parent's was: a result a branch set, reused by a branch of that branch (the same call at the
    same place), is not re-run under `execute_tools` either."""
    effects = recording.tool_effects
    marks = recording.of(f.RunBranched)
    mark = marks[-1].fact if marks else None
    if not isinstance(mark, f.RunBranched):
        return effects
    try:
        parent = Recording.load(store, mark.parent_id)
    except (UnknownRun, ValueError):
        return effects  # the parent is not in this log: its pins are not known
    before = parent.tool_runs_before(mark.parent_seq)
    served = [  # what the branch was served from, by position (as `start_branch` made it)
        e
        for e in _pins_inherited(store, parent)[before:]
        if e.outcome is not None and e.outcome.known
    ]
    first = sum(1 for e in effects if e.seq < marks[-1].seq)
    pinned = list(effects)
    for n, effect in enumerate(effects[first : first + len(served)]):
        was = served[n]
        if was.pinned and _same_call(was.call, effect.call) and was.outcome == effect.outcome:
            pinned[first + n] = dataclasses.replace(effect, pinned=True)
    return tuple(pinned)


def _as_the_agent_would(
    effects: Sequence[ToolEffect], definition: f.RunStarted, agent: AgentBuilder
) -> Sequence[ToolEffect]:
    """The recorded tool runs, with a question about a call that never reported served as what
    it stands for when the agent now makes the tool idempotent: the recorded run asked whether
    a call of a tool that was not idempotent took effect; had it been idempotent, the call
    would have been run again (after a crash) or failed (at its timeout), with no question.
    Served as a crash, the replay resumes and runs it again, and shows where it parts."""

    def made_idempotent(effect: ToolEffect) -> bool:
        name = effect.call.name
        return (
            effect.outcome is not None
            and not effect.outcome.known
            and not effect.pinned
            and name not in definition.idempotent_tools
            and bool(getattr(agent.tools.get(name), "idempotent", False))
        )

    if not any(map(made_idempotent, effects)):
        return effects
    return [dataclasses.replace(e, outcome=None) if made_idempotent(e) else e for e in effects]


class _Asked(RecordedLlm):
    """The recorded LLM, keeping the messages of each request whose view of memory is not the
    run's memory (a summary request, a handler's own view), by digest: the report shows them
    at a divergence, where a fold of the facts could not make them again."""

    def __init__(
        self,
        outcomes: Sequence[f.LlmResponded | f.LlmFailed | None],
        *,
        settings: Mapping[str, Any],
        seen: _Seen,
    ) -> None:
        super().__init__(outcomes, settings=settings)
        self._seen = seen
        self.views: dict[str, list[dict[str, Any]]] = {}

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        own = self._seen.memory
        if memory is not own:
            digest = memory.messages_digest()
            if own is None or digest != own.messages_digest():
                self.views.setdefault(digest, memory.build_messages())
        return await super().call(memory, tools, model)


class _Seen:
    """The engine driving the replay now (a replayed crash makes another): its memory is the
    run's memory after the last fact it recorded."""

    def __init__(self) -> None:
        self.engine: AgentEngine | None = None

    @property
    def memory(self) -> AgentMemory | None:
        return self.engine.memory if self.engine is not None else None

    def __repr__(self) -> str:
        return f"_Seen(engine={self.engine!r})"


def _replayed(scratch: EventStore, recording: Recording) -> list[TraceEntry]:
    """The replayed run's entries, read as the recording was (calls named by their place
    given in full)."""
    return list(entries(scratch, recording.run_id))


def _last_kind(store: EventStore, run_id: str) -> str:
    """The kind of the run's last fact (read alone: the run may be long)."""
    events = store.read(run_id, after=max(0, store.run(run_id).last_seq - 1))
    return events[-1].kind if events else ""


def _drive(engine: AgentEngine, notes: list[TraceEntry]) -> None:
    """Run the engine to its end, or until it waits; re-apply each branch's recorded change
    where it was made (`notes` loses the ones applied)."""
    try:
        while notes:
            target = notes[0].seq - 1
            if engine.seq < target and run_sync(engine.run_until(target)) < target:
                return  # it waits (or ended) before the branch point
            if engine.seq != target:
                notes.clear()  # the replay went past the branch point: the facts differ there
                break
            engine.note(notes.pop(0).fact)
        engine.run()
    except (AgentFailed, HumanInputRequired, EngineError, RunStopped):
        pass  # the outcome is in the log, which is what gets compared


_RESUMED_AFTER = ("RunAborted", "StopRequested")
"""The facts a recorded run may have stopped at and been resumed after."""


def _answers(recording: Recording) -> list[tuple[str, bool]]:
    """The answers to the questions handlers asked (`ctx.ask`), each with whether the run was
    stopped while it waited for it (the replay then waits there too, for the stop)."""
    found = []
    for e in recording.of(f.HumanAnswered):
        if isinstance(e.fact, f.HumanAnswered):
            before = recording.entries[e.seq - 2].fact if e.seq >= 2 else None
            found.append((e.fact.answer, isinstance(before, f.StopRequested)))
    return found


def _stopped_while_waiting(engine: AgentEngine, scratch: EventStore, recording: Recording) -> bool:
    """Record the stops the recorded run took while it waited for a person (nobody drove it:
    recorded by `replay.request_stop` itself) where the replay waits now; whether there were."""
    last = scratch.run(recording.run_id).last_seq
    noted = False
    while last < len(recording.entries) and isinstance(
        stop := recording.entries[last].fact, f.StopRequested
    ):
        engine.note(stop)
        last += 1
        noted = True
    return noted


def assert_replays(
    db: StoreLike,
    run_id: str,
    builder: Builder | None = None,
    *,
    execute_tools: bool = False,
    children: bool = False,
) -> ReplayReport:
    """For tests: replay a recorded run and fail with the divergence report if it differs."""
    report = replay_run(db, run_id, builder, execute_tools=execute_tools, children=children)
    if not report.identical:
        raise AssertionError(str(report))
    return report
