"""A finished run of the real engine and the invariants every run must keep."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventstore import NewEvent, SQLiteEventStore
from eventstore.records import meta_text, with_riders

from .. import facts as f
from ..custom import CustomFact
from ..engine import AgentEngine
from ..errors import AgentFailed, EngineError, HumanInputRequired
from ..facts import Fact
from ..memory import AgentMemory, apply, fold_with_state
from ..recorder import RIDERS, ownership_violation
from ..states.reflecting import ReflectingState, compression_view
from ..trace import Trace
from ..types import TERMINAL_STATES, State, as_state
from ..window import estimate_request
from .watch import Returned, event_problems

if TYPE_CHECKING:
    from ..builder import AgentBuilder

__all__ = ["AgentRun", "Observation", "run_engine"]


@dataclass(frozen=True)
class Observation:
    """What the engine had right after recording one fact."""

    seq: int
    state: str
    fact: Fact | CustomFact
    memory: AgentMemory


@dataclass
class AgentRun:
    """A run driven through the real engine, with the memory it had at every fact.

    `source` is Python that rebuilds the run's inputs (printed when a property fails, so a
    shrunk failure can be pasted into a test). `assert_invariants()` checks every rule below.
    """

    engine: AgentEngine
    observed: list[Observation]
    outcome: str
    escaped: BaseException | None = None
    source: str = ""
    replay_builder: Callable[[str], AgentBuilder] | None = None
    returned: Returned = field(default_factory=list)
    """(state, event) for each event a handler returned, in order (see `watch_handlers`)."""

    @property
    def trace(self) -> Trace:
        return self.engine.trace()

    def violations(self, *, replay: bool = True) -> list[str]:
        """Every invariant the run breaks, one sentence each (empty when it keeps them all);
        `replay=False` leaves out replaying the run (the costliest check)."""
        engine, table = self.engine, self.engine.table
        problems = event_problems(self.returned, table, engine.handlers)  # the likeliest cause
        config = engine.definition.config
        if self.escaped is not None:
            problems.append(
                f"an exception escaped the engine: {type(self.escaped).__name__}: {self.escaped}"
            )
        entries = Trace.load(engine.store, engine.run_id).entries()
        if [e.seq for e in entries] != list(range(1, len(entries) + 1)):
            problems.append("the log has gaps or repeats in its sequence numbers")
        if len(entries) != len(self.observed) or any(
            e.fact != o.fact or e.state != str(o.state)
            for e, o in zip(entries, self.observed, strict=False)
        ):
            problems.append("the log differs from the facts the engine recorded (not append-only)")
        transitions = 0
        for e in entries:
            fact = e.fact
            violation = ownership_violation(fact.kind, e.state, engine.records)
            if violation is not None:
                problems.append(f"seq {e.seq}: {violation}")
            if isinstance(fact, f.Transitioned):
                transitions += 1
                if table.get((as_state(fact.from_state), fact.event)) != as_state(fact.to_state):
                    problems.append(
                        f"seq {e.seq}: transition {fact.from_state} --{fact.event}--> "
                        f"{fact.to_state} is not a row of the table"
                    )
        if entries and isinstance(entries[-1].fact, f.RunAborted):
            aborted = entries[-1].fact
            problems.append(f"the engine stopped: {aborted.error_type}: {aborted.message}")
        cap = config.effective_safety_cap()
        state = engine.current_state()
        if self.outcome == "waiting":
            if state != State.WaitingForHuman:
                problems.append(f"the run says it waits for a human but is in {state}")
        elif state not in TERMINAL_STATES:
            problems.append(f"the run ended in {state}, not in Done or Error")
        if transitions > cap:
            problems.append(f"{transitions} transitions, more than the safety cap {cap}")
        problems.extend(self._memory_rules(entries))
        problems.extend(self._context_rules())
        if replay:
            problems.extend(self._replay_rule())
        return problems

    def _memory_rules(self, entries: list[Any]) -> list[str]:
        problems: list[str] = []
        config = self.engine.definition.config
        previous: AgentMemory | None = None
        folded: AgentMemory | None = None
        for i, o in enumerate(self.observed):
            m = o.memory
            where = f"seq {o.seq} ({o.state}, {o.fact.kind})"
            if m.step > config.max_steps:
                problems.append(f"{where}: step {m.step} exceeds max_steps {config.max_steps}")
            if i >= len(entries):
                break
            stored = entries[i].fact  # the fact as read back from the log, folded one at a time
            folded = fold_with_state([stored])[0] if folded is None else apply(folded, stored)
            if folded != m:
                diff = [k for k in type(m).model_fields if getattr(folded, k) != getattr(m, k)]
                problems.append(f"{where}: folding the log gives another memory ({diff})")
            if previous is not None:
                reflecting = o.state == State.Reflecting
                guarded = isinstance(o.fact, f.InputChecked)  # a message no LLM has read yet
                if (
                    not reflecting
                    and not guarded
                    and m.history[: len(previous.history)] != previous.history
                ):
                    problems.append(f"{where}: history shrank or changed outside Reflecting")
                if m.step < previous.step:
                    problems.append(f"{where}: step went back from {previous.step} to {m.step}")
                if m.total_usage.total_tokens < previous.total_usage.total_tokens:
                    problems.append(f"{where}: token usage went down")
                if m.retry_count < previous.retry_count and not reflecting:
                    problems.append(f"{where}: retry count reset outside Reflecting")
                for name in ("final_answer", "error"):
                    if getattr(previous, name) is not None and getattr(m, name) != getattr(
                        previous, name
                    ):
                        problems.append(f"{where}: {name} changed after it was set")
            previous = m
        if problems:
            return problems[:5] + (
                [f"... and {len(problems) - 5} more"] if len(problems) > 5 else []
            )
        return []

    def _context_rules(self) -> list[str]:
        """With a context window: no LLM request above it (Planning fails the run instead),
        and each compaction leaves the request the size it records."""
        definition = self.engine.definition
        problems: list[str] = []
        previous: AgentMemory | None = None
        builtin_reflecting = isinstance(self.engine.handlers.get(State.Reflecting), ReflectingState)
        for o in self.observed:
            limit = o.memory.config.context_limit()
            where = f"seq {o.seq} ({o.state}, {o.fact.kind})"
            if limit is not None and previous is not None and isinstance(o.fact, f.LlmRequested):
                if o.fact.purpose == "plan":
                    size = estimate_request(previous, definition.tools, limit)
                elif builtin_reflecting:
                    size = estimate_request(compression_view(previous), (), limit)
                else:
                    size = None
                if size is not None and not size.fits:
                    problems.append(
                        f"{where}: a {o.fact.purpose} request of about {size.tokens} tokens was "
                        f"sent, over the context limit {limit}"
                    )
            if limit is not None and isinstance(o.fact, f.ContextCompacted):
                after = estimate_request(o.memory, definition.tools, limit).tokens
                if after != o.fact.tokens_after or after > limit:
                    problems.append(
                        f"{where}: the compaction records {o.fact.tokens_after} tokens after it, "
                        f"the request is {after} (limit {limit})"
                    )
            previous = o.memory
        return problems[:5]

    def _replay_rule(self) -> list[str]:
        if self.escaped is not None or self.outcome == "aborted":
            return []
        try:
            replay = importlib.import_module("replay")  # optional: the replay package
        except ImportError:  # pragma: no cover - replay ships with agentsm
            return []
        report = replay.replay_run(self.engine.store, self.engine.run_id, self.replay_builder)
        return [] if report.identical else [f"the run does not replay identical: {report}"]

    def save(self, path: str | Path) -> str:
        """Copy this run's log into the SQLite database at `path` (created when missing), to
        open it with `agentsm show RUN --db path` or `agentsm replay`; returns the run id."""
        source, run_id = self.engine.store, self.engine.run_id
        record = source.run(run_id)
        events = with_riders(
            [
                NewEvent(e.kind, e.payload, meta_text(e.meta), e.recorded_at, e.version)
                for e in source.read(run_id)
            ],
            RIDERS,
        )
        target = SQLiteEventStore(path)
        try:
            target.create_run(
                run_id,
                record.task,
                info=record.info,
                created_at=record.created_at,
                events=events,
                status=record.status,
            )
        finally:
            target.close()
        return run_id

    def assert_invariants(self) -> None:
        """Raise AssertionError naming every broken invariant and how to reproduce the run."""
        problems = self.violations()
        if problems:
            listed = "\n".join(f"  - {p}" for p in problems)
            raise AssertionError(
                f"run {self.engine.run_id} breaks {len(problems)} invariant(s):\n{listed}\n"
                f"reproduce with:\n{self.source}"
            )

    def __repr__(self) -> str:
        return self.source or f"AgentRun(run_id={self.engine.run_id!r}, outcome={self.outcome!r})"


def run_engine(engine: AgentEngine) -> tuple[list[Observation], str, BaseException | None]:
    """Run an engine to its end, watching every fact; never raises."""
    observed: list[Observation] = []
    engine.observe(
        lambda seq, state, fact, memory: observed.append(Observation(seq, state, fact, memory))
    )
    try:
        engine.run()
        outcome = "done"
    except AgentFailed:
        outcome = "failed"
    except HumanInputRequired:
        outcome = "waiting"
    except EngineError:
        outcome = "aborted"
    except Exception as e:  # anything else is a bug the invariants report
        return observed, "escaped", e
    return observed, outcome, None
