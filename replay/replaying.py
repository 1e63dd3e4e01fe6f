"""Replay: re-run a recorded run with the current code against its own recorded effects."""

from __future__ import annotations

from agentsm import AgentEngine, AgentFailed, EngineError, HumanInputRequired
from agentsm import facts as f
from agentsm._sync import run_sync
from agentsm.llm.base import llm_settings
from agentsm.trace import Trace
from eventstore import SQLiteEventStore

from .effects import RecordedDecisions, RecordedLlm, RecordedTools, ReplayedCrash
from .recording import Recording
from .report import ReplayReport, compare_runs
from .source import Builder, StoreLike, open_store, recorded_builder

__all__ = ["assert_replays", "replay_run"]


def _finish(engine: AgentEngine) -> None:
    try:
        engine.run()
    except (AgentFailed, HumanInputRequired, EngineError):
        pass  # the outcome is in the log, which is what gets compared


def replay_run(
    db: StoreLike, run_id: str, builder: Builder | None = None, *, execute_tools: bool = False
) -> ReplayReport:
    """Re-run `run_id` with the current agent (`builder(task)`, or the recorded definition)
    against its recorded LLM responses, tool results and human decisions, in a scratch store,
    and compare every fact with the recording. The recorded run is only read. A branched run is
    replayed from its start too, its recorded changes re-applied where it was branched."""
    store = open_store(db)
    recording = Recording.load(store, run_id)
    definition = recording.definition
    agent = (
        builder(definition.task)
        if builder is not None
        else recorded_builder(definition, recording.run_id)
    )
    scratch = SQLiteEventStore(":memory:")
    own = agent.llm_caller  # the user's LLM, if the builder sets one: its settings count
    settings = llm_settings(own) if own is not None else definition.llm
    agent.llm(RecordedLlm(recording.llm_outcomes, settings=settings))
    agent.store(scratch).run_id(recording.run_id)
    agent.on_approval(RecordedDecisions(recording.decisions))
    interrupted = recording.interrupted_calls
    if not execute_tools:
        agent.tool_runner(RecordedTools(recording.tool_outcomes, interrupted=interrupted))
    agent.patches(recording.patches.__contains__)  # old runs replay their old code paths
    engine = agent.build()
    branches = [e for e in recording.entries if isinstance(e.fact, f.RunBranched)]
    while True:
        try:
            for entry in branches:  # re-apply each branch where it was made
                if engine.seq < entry.seq and run_sync(engine.run_until(entry.seq - 1)) == (
                    entry.seq - 1
                ):
                    engine.note(entry.fact)
            _finish(engine)
            if not isinstance(
                Trace.load(scratch, recording.run_id).entries()[-1].fact, f.RunAborted
            ):
                break
        except ReplayedCrash:  # the recorded run died here and was resumed: so is this one
            pass
        # the recorded run stopped here (died, or aborted at an LLM deadline) and was resumed
        if scratch.run(recording.run_id).last_seq >= recording.run.last_seq:
            break  # ... or it was never resumed
        engine = agent.attach(recording.run_id)
    replayed = Trace.load(scratch, recording.run_id).entries()
    return compare_runs(recording.run_id, recording.entries, replayed)


def assert_replays(
    db: StoreLike, run_id: str, builder: Builder | None = None, *, execute_tools: bool = False
) -> ReplayReport:
    """For tests: replay a recorded run and fail with the divergence report if it differs."""
    report = replay_run(db, run_id, builder, execute_tools=execute_tools)
    if not report.identical:
        raise AssertionError(str(report))
    return report
