"""A recorded run read back for replay: its facts, and the effects it can serve again."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from agentsm import ToolCall, ToolOutcome
from agentsm import facts as f
from agentsm.memory import AgentMemory, apply, initial_memory
from agentsm.trace import FullCalls, TraceEntry, bulk_reading, entries
from eventstore import EventStore, NewEvent, RunRecord

from .errors import SeqOutOfRange
from .report import ReplayReport, compare_runs
from .requests import Views
from .source import resolve_run

__all__ = ["DecisionEffect", "Recording", "ToolEffect"]


_STATES: dict[str, str] = {}


def _state_of(meta: str | Mapping[str, Any]) -> str:
    """The state a new event's envelope names (its metadata as the recorder wrote it)."""
    if isinstance(meta, str) and meta.startswith('{"state":'):
        head = meta.partition(',"step":')[0]
        state = _STATES.get(head)
        if state is None:
            parsed = json.loads(meta)
            state = str(parsed.get("state", "")) if isinstance(parsed, dict) else ""
            if head != meta and len(_STATES) < 1000:  # the few states of the tables in use
                _STATES[head] = state
        return state
    parsed = json.loads(meta) if isinstance(meta, str) else meta
    return str(parsed.get("state", "")) if isinstance(parsed, Mapping) else ""


@dataclass(frozen=True)
class ToolEffect:
    """One recorded tool run: the seq of its start, the call, and its outcome (None: the
    process stopped while it ran). `pinned`: a branch set this result; it is never re-run."""

    seq: int
    call: ToolCall
    outcome: ToolOutcome | None
    pinned: bool = False


def _call(fact: f.ToolCallStarted | f.ToolExecuted) -> ToolCall:
    """The call a fact read through `with_calls` names (it always gives it)."""
    if fact.call is None:
        raise ValueError(f"{fact.kind} names the call at place {fact.index}, and the run has none")
    return fact.call


@dataclass(frozen=True)
class DecisionEffect:
    """One recorded human decision: the seq of its fact, the decision, and the position and
    call it applied to (None when it matched no waiting call)."""

    seq: int
    decision: f.Decision
    index: int | None
    call: ToolCall | None


@dataclass(frozen=True)
class Recording:
    """One run of a store: catalog record and trace entries, in order."""

    run: RunRecord
    entries: tuple[TraceEntry, ...]
    asked: dict[int, AgentMemory] = field(default_factory=dict, repr=False, compare=False)
    """The memory just before each HumanDecided fact (by seq), kept as the run is read: the
    calls its decisions apply to (see `decision_groups`)."""
    stored: tuple[tuple[str, int, str], ...] = field(default=(), repr=False, compare=False)
    """Each fact's kind, version and payload text as the log holds them, in `entries`' order:
    a replay that wrote the very same texts in the same states is identical without building
    its facts (see `same_as_written`)."""

    @classmethod
    def load(cls, store: EventStore, run_id: str, *, upto: int | None = None) -> Recording:
        """Read a run (up to seq `upto`) from the store, folding it once."""
        record = store.run(resolve_run(store, run_id))
        calls = FullCalls()
        read: list[TraceEntry] = []
        stored: list[tuple[str, int, str]] = []
        asked: dict[int, AgentMemory] = {}
        before = None
        with bulk_reading():
            for entry in entries(store, record.run_id, upto=upto, calls=calls, stored=stored):
                if isinstance(entry.fact, f.HumanDecided) and before is not None:
                    asked[entry.seq] = before
                read.append(entry)
                before = calls.memory
        return cls(record, tuple(read), asked, tuple(stored))

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

    @property
    def finished(self) -> bool:
        """True when the run recorded its closing fact (RunFinished)."""
        return bool(self.entries) and isinstance(self.entries[-1].fact, f.RunFinished)

    def of(self, *kinds: type) -> list[TraceEntry]:
        """The entries whose fact is of one of the `kinds` (or a subclass), in order: found
        through an index of the run's fact types, made once, instead of a pass over them all."""
        return [self.entries[n] for n in self._positions(*kinds)]

    @cached_property
    def _types(self) -> dict[type, list[int]]:
        """Where each type of fact stands in the run (positions in `entries`)."""
        index: dict[type, list[int]] = {}
        for n, e in enumerate(self.entries):
            at = index.get(type(e.fact))
            if at is None:
                index[type(e.fact)] = [n]
            else:
                at.append(n)
        return index

    def same_as_written(self, written: Sequence[NewEvent]) -> bool:
        """Whether a replay that wrote `written` (in order, from seq 1) wrote exactly what the
        log holds, in the same states: then it is identical, and its facts need not be built
        and compared one by one. False says only that the texts differ somewhere (a log of
        an earlier release may write the same fact otherwise): compare the facts then."""
        if not self.finished:
            written = written[: len(self.entries)]
        if len(written) != len(self.stored) or len(written) != len(self.entries):
            return False
        for entry, (kind, version, payload), event in zip(
            self.entries, self.stored, written, strict=True
        ):
            if (
                event.payload != payload
                or event.kind != kind
                or event.version != version
                or _state_of(event.meta) != entry.state
            ):
                return False
        return True

    def compare(self, replayed: list[TraceEntry], *, views: Views | None = None) -> ReplayReport:
        """A replay's entries against this recording, fact by fact; a recording that stopped
        (its process died) says nothing past its end, so the replay is compared up to there.
        `views`: the messages of the replay's requests, by digest (see `compare_runs`)."""
        if not self.finished:
            replayed = replayed[: len(self.entries)]
        return compare_runs(self.run_id, self.entries, replayed, views=views)

    @cached_property
    def llm_outcomes(self) -> tuple[f.LlmResponded | f.LlmFailed | None, ...]:
        """Every LLM call's outcome, in order; None for a call the process died in."""
        outcomes: list[f.LlmResponded | f.LlmFailed | None] = []
        for e in self.of(f.LlmRequested, f.LlmResponded, f.LlmFailed):
            if isinstance(e.fact, f.LlmRequested):
                outcomes.append(None)
            elif isinstance(e.fact, f.LlmResponded | f.LlmFailed) and outcomes:
                outcomes[-1] = e.fact
        return tuple(outcomes)

    @cached_property
    def tool_effects(self) -> tuple[ToolEffect, ...]:
        """Every tool run the run started, in order, with its outcome.

        A batch's starts are committed together and the results it got follow them in call
        order; a result pairs with the last start of the block at its place. A start
        without a result never reported (the process stopped, or the call was abandoned after
        its timeout): its outcome is None, and a replay stops there too, keeping the batch's
        other results, and goes on as the recorded run did (run again if idempotent, else a
        human is asked whether it took effect). A start the run asked a human about right
        after its block (a sub-agent that waited, a call abandoned at its timeout) is served
        as an unknown outcome, which leads to the same question without a stop."""
        facts = [e.fact for e in self.entries]
        effects: list[ToolEffect] = []
        pinned = False
        i = 0  # the position after the last block of starts and results
        for at in self._positions(f.ToolCallStarted, f.RunBranched):
            fact = facts[at]
            if isinstance(fact, f.RunBranched):
                pinned = "tool_result" in fact.changes
                continue
            if at < i:  # a start of the block just read
                continue
            i = at
            j = i
            while j < len(facts) and isinstance(facts[j], f.ToolCallStarted):
                j += 1
            k = j  # the results, each followed by what an after_tool_call hook made of it
            while k < len(facts) and isinstance(facts[k], f.ToolExecuted | f.ObservationRewritten):
                k += 1
            starts = [x for x in facts[i:j] if isinstance(x, f.ToolCallStarted)]
            calls = [_call(x) for x in starts]
            outcomes: list[ToolOutcome | None] = [None] * len(calls)
            paired = [False] * len(calls)
            s = len(calls) - 1
            for x in reversed([x for x in facts[j:k] if isinstance(x, f.ToolExecuted)]):
                while s >= 0 and starts[s].index != x.index:
                    s -= 1
                if s < 0:
                    break
                outcomes[s] = ToolOutcome(
                    x.observation, x.success, x.error_type, usage=x.usage, images=x.images or ()
                )
                paired[s] = True
                s -= 1
            asked = facts[k] if k < len(facts) else None
            if isinstance(asked, f.ApprovalRequested) and asked.reason == "outcome_unknown":
                asked_ids = Counter(asked.call_ids)  # once per call asked about: the last
                for n in reversed(range(len(calls))):  # starts (a start made again after a
                    if outcomes[n] is None and asked_ids[calls[n].id] > 0:  # stop is later)
                        outcomes[n] = ToolOutcome.unknown("OutcomeUnknown", "it never reported")
                        asked_ids[calls[n].id] -= 1
            for n, call in enumerate(calls):
                effects.append(ToolEffect(self.entries[i + n].seq, call, outcomes[n], pinned))
                pinned = pinned and not paired[n]
            i = k
        return tuple(effects)

    def _positions(self, *kinds: type) -> list[int]:
        """The positions in `entries` of the facts of the `kinds` (or subclasses), in order."""
        return sorted(n for t, at in self._types.items() if issubclass(t, kinds) for n in at)

    @cached_property
    def decision_groups(self) -> tuple[tuple[DecisionEffect, ...], ...]:
        """The human decisions of the run, one group per HumanDecided fact, in order, each
        with the call it decided (found by folding the log up to it)."""
        groups: list[tuple[DecisionEffect, ...]] = []
        for e in self.of(f.HumanDecided):
            if isinstance(e.fact, f.HumanDecided):
                memory = self.asked.get(e.seq) or self._before(e.seq)
                targets = memory.decision_targets(e.fact.decisions)
                groups.append(
                    tuple(
                        DecisionEffect(
                            e.seq, d, t, memory.planned_calls[t] if t is not None else None
                        )
                        for d, t in zip(e.fact.decisions, targets, strict=True)
                    )
                )
        return tuple(groups)

    def _before(self, seq: int) -> AgentMemory:
        """The memory just before fact `seq`, folded from the entries."""
        memory = initial_memory(self.definition)
        for e in self.entries[1:]:
            if e.seq >= seq:
                break
            memory = apply(memory, e.fact)
        return memory

    @cached_property
    def heard(self) -> tuple[tuple[int, f.Steered | f.StopRequested], ...]:
        """What the run heard from outside (steering messages, stop requests), with seqs."""
        return tuple(
            (e.seq, e.fact)
            for e in self.of(f.Steered, f.StopRequested)
            if isinstance(e.fact, f.Steered | f.StopRequested)
        )

    @cached_property
    def patches(self) -> frozenset[str]:
        """The deliberate changes whose new code the run ran (`ctx.patched`)."""
        return frozenset(
            e.fact.change_id for e in self.of(f.PatchMarked) if isinstance(e.fact, f.PatchMarked)
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

    @cached_property
    def draws(self) -> tuple[tuple[int, f.ValueDrawn], ...]:
        """The values handlers drew (`ctx.now()`, `uuid()`, `random()`), in order, with seqs."""
        return tuple(
            (e.seq, e.fact) for e in self.of(f.ValueDrawn) if isinstance(e.fact, f.ValueDrawn)
        )

    def draws_before(self, seq: int) -> int:
        """How many values the run had drawn by seq `seq`: the position of the next one."""
        return sum(1 for s, _ in self.draws if s <= seq)

    def llm_calls_before(self, seq: int) -> int:
        """How many LLM calls the run had started by seq `seq` (answered, failed or cut short
        by a stop): the position of the next one."""
        return sum(1 for e in self.entries if e.seq <= seq and isinstance(e.fact, f.LlmRequested))

    def tool_runs_before(self, seq: int) -> int:
        """How many tool runs the run had started by seq `seq`: the position of the next one."""
        return sum(1 for e in self.tool_effects if e.seq <= seq)

    def __repr__(self) -> str:
        return f"Recording(run_id={self.run_id!r}, facts={len(self.entries)})"
