"""A recorded run read back for replay: its facts, and the effects it can serve again."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from agentsm import ToolOutcome
from agentsm import facts as f
from agentsm.trace import TraceEntry
from eventstore import EventStore, RunRecord

from .errors import SeqOutOfRange
from .source import resolve_run

__all__ = ["Recording"]


@dataclass(frozen=True)
class Recording:
    """One run of a store: catalog record and trace entries, in order."""

    run: RunRecord
    entries: tuple[TraceEntry, ...]

    @classmethod
    def load(cls, store: EventStore, run_id: str, *, upto: int | None = None) -> Recording:
        """Read a run (up to seq `upto`) from the store."""
        record = store.run(resolve_run(store, run_id))
        events = store.read(record.run_id, upto=upto)
        return cls(record, tuple(TraceEntry.from_stored(e) for e in events))

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def definition(self) -> f.RunStarted:
        """The run's RunStarted fact."""
        first = self.entries[0].fact if self.entries else None
        if not isinstance(first, f.RunStarted):
            raise ValueError(f"Run {self.run_id} does not begin with RunStarted; it is damaged.")
        return first

    @cached_property
    def llm_outcomes(self) -> tuple[f.LlmResponded | f.LlmFailed | None, ...]:
        """Every LLM call's outcome, in order; None for a call the process died in."""
        outcomes: list[f.LlmResponded | f.LlmFailed | None] = []
        for e in self.entries:
            if isinstance(e.fact, f.LlmRequested):
                outcomes.append(None)
            elif isinstance(e.fact, f.LlmResponded | f.LlmFailed) and outcomes:
                outcomes[-1] = e.fact
        return tuple(outcomes)

    @cached_property
    def interrupted_calls(self) -> dict[str, int]:
        """How many times each tool call was started and never finished (the process died)."""
        open_starts: dict[str, int] = {}
        lost: dict[str, int] = {}
        for e in self.entries:
            if isinstance(e.fact, f.ToolCallStarted):
                call_id = e.fact.call.id
                if open_starts.get(call_id):
                    lost[call_id] = lost.get(call_id, 0) + 1
                open_starts[call_id] = 1
            elif isinstance(e.fact, f.ToolExecuted):
                open_starts[e.fact.call.id] = 0
            elif isinstance(e.fact, f.ApprovalRequested) and e.fact.reason == "outcome_unknown":
                for call_id in e.fact.call_ids:
                    if open_starts.get(call_id):
                        lost[call_id] = lost.get(call_id, 0) + 1
                        open_starts[call_id] = 0
        for call_id, still_open in open_starts.items():
            if still_open:
                lost[call_id] = lost.get(call_id, 0) + 1
        return lost

    @cached_property
    def tool_outcomes(self) -> dict[str, ToolOutcome]:
        """The recorded outcome of each executed call, by call id."""
        return {
            e.fact.call.id: ToolOutcome(e.fact.observation, e.fact.success, e.fact.error_type)
            for e in self.entries
            if isinstance(e.fact, f.ToolExecuted)
        }

    @cached_property
    def decisions(self) -> dict[str, f.Decision]:
        """The human decision on each call that waited for one, by call id."""
        return {
            d.call_id: d
            for e in self.entries
            if isinstance(e.fact, f.HumanDecided)
            for d in e.fact.decisions
        }

    @cached_property
    def patches(self) -> frozenset[str]:
        """The deliberate changes whose new code the run ran (`ctx.patched`)."""
        return frozenset(
            e.fact.change_id for e in self.entries if isinstance(e.fact, f.PatchMarked)
        )

    def branch_point(self, at: int) -> int:
        """The last complete transition at or before seq `at` (1 if there is none); a seq
        the run does not have is refused."""
        last = self.entries[-1].seq if self.entries else 0
        if not 1 <= at <= last:
            raise SeqOutOfRange(self.run_id, at, last, "branch point")
        point = 1
        for e in self.entries:
            if e.seq > at:
                break
            if isinstance(e.fact, f.Transitioned | f.RunBranched):
                point = e.seq
        return point

    def llm_calls_before(self, seq: int) -> int:
        """How many LLM calls the run made before seq `seq`."""
        return sum(
            1
            for e in self.entries
            if e.seq <= seq and isinstance(e.fact, f.LlmResponded | f.LlmFailed)
        )

    def __repr__(self) -> str:
        return f"Recording(run_id={self.run_id!r}, facts={len(self.entries)})"
