"""Trace: a read view over a run's log, one TraceEntry per recorded fact."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from sys import intern
from typing import IO, Any

from eventstore import EventStore, StoredEvent

from . import facts as f
from .facts import FACTS, Fact
from .memory import AgentMemory, apply, fold_log, in_full, initial_memory
from .reading import (
    CHUNK,
    SHARED,
    bulk_reading,
    decode,
    decoded,
    held_fields,
    holding,
    parsed_meta,
    read_events,
    read_rows,
)
from .tables import Column, render_table, styles_wanted, terminal_width
from .text import plural
from .types import ReasoningPart, TokenUsage

__all__ = [
    "TRACE_COLUMNS",
    "FullCalls",
    "Trace",
    "TraceEntry",
    "bulk_reading",
    "decode",
    "decoded",
    "entries",
    "fold_log",
    "read_events",
    "summarize",
    "with_calls",
]

TRACE_COLUMNS = (
    Column("seq", "right"),
    Column("step", "right"),
    Column("state"),
    Column("fact"),
    Column("data", flexible=True),
)
"""The columns of a trace table, for `Trace.format` and `agentsm show`."""


def entries(
    store: EventStore,
    run_id: str,
    *,
    upto: int | None = None,
    calls: FullCalls | None = None,
    stored: list[tuple[str, int, str]] | None = None,
) -> Iterator[TraceEntry]:
    """The trace entries of a run (up to seq `upto`), in order, each tool call given in full
    (through `calls`, whose memory is then the memory after the entry given last): as
    `Trace.load` reads them, decoding a short payload (and envelope) met before once.
    `stored` receives each fact's kind, version and payload text as the log holds them."""
    full = calls if calls is not None else FullCalls()
    facts: dict[tuple[str, int, str, Any], Fact] = {}
    metas: dict[str, tuple[int, str, dict[str, Any] | None, bool]] = {}
    kinds: dict[str, tuple[bool, bool] | None] = {}
    for seq, kind, version, payload, meta, at in read_rows(store, run_id, upto):
        if stored is not None:
            stored.append((kind, version, payload))
        text = meta if isinstance(meta, str) else None
        envelope = metas.get(text) if text is not None else None
        if envelope is None:
            parsed = parsed_meta(meta)
            metrics = parsed.get("metrics")
            envelope = (
                int(parsed.get("step", 0)),
                intern(str(parsed.get("state", ""))),
                metrics if isinstance(metrics, dict) else None,
                parsed.get("custom") is True,  # one of the user's own facts
            )
            if text is not None:
                if len(metas) >= CHUNK:
                    metas.clear()
                metas[text] = envelope
        step, state, metrics, marked = envelope
        if kind not in kinds:
            kinds[kind] = held_fields(kind)
        key = (kind, version, payload, holding(kinds[kind], state, step))
        fact = facts.get(key) if len(payload) <= SHARED else None
        if fact is None:
            envelope_meta = {"state": state, "step": step} if kinds[kind] else None
            fact = FACTS.decode(
                payload,
                kind,
                version,
                run_id=run_id,
                seq=seq,
                custom=seq > 1 or marked,  # as `decode` reads it: a run begins RunStarted
                meta=envelope_meta,
            )
            if len(payload) <= SHARED:
                if len(facts) >= CHUNK:
                    facts.clear()
                facts[key] = fact
        shown = full(fact)
        yield TraceEntry(
            seq, step, state, intern(kind), at, shown, dict(metrics) if metrics else {}
        )


class FullCalls:
    """Folds one run's facts as they are read, from its RunStarted, and gives each back with
    what it names by place given in full too (see `agentsm.memory.in_full`); facts
    met before a RunStarted are given as they are."""

    def __init__(self) -> None:
        self.memory: AgentMemory | None = None

    def __call__(self, fact: Fact) -> Fact:
        memory = self.memory
        if memory is None:
            if isinstance(fact, f.RunStarted):
                self.memory = initial_memory(fact)
            return fact
        shown: Fact = in_full(fact, memory)
        self.memory = apply(memory, shown)
        return shown

    def __repr__(self) -> str:
        return f"FullCalls(step={self.memory.step if self.memory else None})"


def with_calls(pairs: Iterable[tuple[StoredEvent, Fact]]) -> Iterator[tuple[StoredEvent, Fact]]:
    """Each event with its fact, what it names by place given in full (`FullCalls`)."""
    full = FullCalls()
    for event, fact in pairs:
        yield event, full(fact)


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One recorded fact with its envelope: where it happened, when, and a one-line summary
    (`data`, made when it is read)."""

    seq: int
    step: int
    state: str
    event: str
    timestamp: float
    fact: Fact = field(repr=False)
    metrics: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def data(self) -> str:
        """One line saying what the fact records (see `summarize`), and, for a tool's result,
        how many progress reports and partial results the tool gave while it ran (measured,
        not recorded as facts)."""
        said = summarize(self.fact)
        metrics = self.metrics
        if not metrics or ("progress" not in metrics and "partials" not in metrics):
            return said
        counts = [
            plural(n, word)
            for n, word in (
                (metrics.get("progress"), "progress report"),
                (metrics.get("partials"), "partial result"),
            )
            if isinstance(n, int) and n
        ]
        return f"{said} ({', '.join(counts)})" if counts else said

    @classmethod
    def from_stored(cls, stored: StoredEvent) -> TraceEntry:
        """Decode a stored event into a trace entry."""
        return cls.of(stored, decode(stored))

    @classmethod
    def of(cls, stored: StoredEvent, fact: Fact) -> TraceEntry:
        """The entry of a stored event whose fact is already known (decoded before)."""
        meta = stored.meta
        metrics = meta.get("metrics")
        return cls(
            stored.seq,
            int(meta.get("step", 0)),
            intern(str(meta.get("state", ""))),  # a few names, repeated on every entry
            intern(stored.kind),
            stored.recorded_at,
            fact,
            dict(metrics) if metrics else {},
        )

    def __repr__(self) -> str:
        return (
            f"TraceEntry(seq={self.seq}, step={self.step}, state={self.state!r}, "
            f"event={self.event!r}, data={self.data!r}, timestamp={self.timestamp})"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the envelope and the fact."""
        return {
            "seq": self.seq,
            "step": self.step,
            "state": self.state,
            "event": self.event,
            "data": self.data,
            "timestamp": self.timestamp,
            "metrics": self.metrics,
            "fact": self.fact.model_dump(mode="json"),
        }


class Trace:
    """Every fact of one run, in order; read from the log, never kept apart from it."""

    def __init__(self, run_id: str, entries: Sequence[TraceEntry]) -> None:
        self.run_id = run_id
        self._entries = list(entries)

    @classmethod
    def load(cls, store: EventStore, run_id: str, *, upto: int | None = None) -> Trace:
        """The trace of `run_id` as the store holds it (up to seq `upto`)."""
        with bulk_reading():
            return cls(run_id, list(entries(store, run_id, upto=upto)))

    def entries(self) -> list[TraceEntry]:
        """All entries, in sequence order."""
        return list(self._entries)

    def facts(self) -> list[Fact]:
        """The facts alone, in order (what `fold` takes)."""
        return [e.fact for e in self._entries]

    def for_state(self, name: str) -> list[TraceEntry]:
        """Entries recorded while the engine was in state `name`."""
        return [e for e in self._entries if e.state == name]

    def to_json(self) -> str:
        """The trace as a JSON array of entries."""
        return json.dumps([e.to_dict() for e in self._entries], indent=2)

    def rows(self) -> list[list[str]]:
        """One row per fact: seq, step, state, fact, summary (what `format` shows)."""
        return [[str(e.seq), str(e.step), e.state, e.event, e.data] for e in self._entries]

    def format(self, width: int | None = 100, *, styled: bool = False) -> str:
        """A table of every fact (seq, step, state, fact, summary), fitted into `width`
        characters (None: no limit), each on one line; recorded text is shown with its control
        characters escaped (see `agentsm.text.printable`)."""
        return render_table(TRACE_COLUMNS, self.rows(), width=width, styled=styled)

    def print(self, file: IO[str] | None = None) -> None:
        """Print the table of every fact, fitted to the terminal (not cut when piped)."""
        target = file if file is not None else sys.stdout
        print(self.format(terminal_width(target), styled=styles_wanted(target)), file=target)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[TraceEntry]:
        return iter(self._entries)

    def __getitem__(self, index: int) -> TraceEntry:
        return self._entries[index]

    def __repr__(self) -> str:
        return f"Trace(run_id={self.run_id!r}, entries={len(self._entries)})"


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reasoning(parts: tuple[ReasoningPart, ...]) -> str:
    """The start of a response's reasoning, as `summarize` puts it before the response."""
    if not parts:
        return ""
    text = " ".join(p.text for p in parts if p.text)
    hidden = sum(1 for p in parts if not p.text)
    redacted = f"{hidden} redacted" if hidden else ""
    shown = f"{_short(text, 50)!r}{' + ' if redacted else ''}" if text else ""
    return f"thought {shown}{redacted}; "


def _cached(usage: TokenUsage) -> str:
    """The prompt-cache reads and writes of a response's usage, if it had any."""
    counts = [
        f"{name} {n}"
        for name, n in (("read", usage.cache_read_tokens), ("written", usage.cache_write_tokens))
        if n
    ]
    return f" (cache {', '.join(counts)})" if counts else ""


def summarize(fact: Fact) -> str:
    """One line saying what a fact records."""
    match fact:
        case f.RunStarted():
            skills = f" skills={len(fact.skills)}" if fact.skills else ""
            servers = ",".join(s.name for s in fact.mcp_servers)
            mcp = f" mcp={servers}" if servers else ""
            text = (
                f"task={_short(fact.task, 50)!r} type={fact.task_type} tools={len(fact.tools)}"
                f"{skills}{mcp}"
            )
            link = fact.parent_call
            if fact.thread is not None:
                text = f"turn {fact.thread.turn} of thread {fact.thread.id} {text}"
            return text if link is None else f"sub-agent of {link.run_id}@{link.seq} {text}"
        case f.StepStarted():
            return f"step {fact.step}"
        case f.LlmRequested():
            return f"{fact.purpose} model={fact.model or '(default)'} tools={len(fact.tools)}"
        case f.LlmResponded():
            r = fact.response
            usage = f" tokens={r.usage.total_tokens}{_cached(r.usage)}" if r.usage else ""
            thought = _reasoning(r.reasoning)
            if r.is_final:
                return f"{thought}answer {_short(r.content or '')!r}{usage}"
            calls = ", ".join(f"{c.name}({_short(c.args, 30)})" for c in r.calls)
            return f"{thought}calls {calls} confidence={r.confidence}{usage}"
        case f.LlmFailed():
            return f"{fact.purpose} {fact.error_type}: {_short(fact.message)}"
        case f.ConfidenceLow():
            return f"confidence {fact.confidence} < {fact.threshold}"
        case f.ToolsRejected():
            return "; ".join(_short(e.observation) for e in fact.entries)
        case f.ToolCallsPlanned():
            mode = "parallel" if fact.parallel else "sequential"
            if fact.calls is None:
                return f"{mode}: the calls of the plan response"
            return f"{mode}: " + ", ".join(f"{c.name}({_short(c.args, 30)})" for c in fact.calls)
        case f.ApprovalRequested():
            return f"calls {', '.join(fact.call_ids)}"
        case f.HumanDecided():
            return ", ".join(
                f"{d.call_id}={d.verdict}" + (f" {_short(d.answer)!r}" if d.answer else "")
                for d in fact.decisions
            )
        case f.QuestionAsked():
            return f"asked {_short(fact.question, 70)!r}"
        case f.HumanAnswered():
            return f"answered {_short(fact.answer, 70)!r}"
        case f.Steered():
            return f"message {_short(fact.text, 70)!r}"
        case f.StopRequested():
            return "stop requested" + (f": {_short(fact.reason, 60)}" if fact.reason else "")
        case f.ToolCallStarted():
            if fact.call is None:
                return f"call #{fact.index}"
            return f"{fact.call.name}({_short(fact.call.args, 40)})"
        case f.ToolExecuted():
            usage = f" tokens={fact.usage.total_tokens}" if fact.usage is not None else ""
            name = fact.call.name if fact.call is not None else f"call #{fact.index}"
            return f"{name} -> {_short(fact.observation)}{usage}"
        case f.InputChecked():
            if fact.verdict == "replaced":
                return f"replaced by {_short(fact.text or '', 60)!r}"
            return f"refused: {_short(fact.reason, 70)}" if fact.verdict == "refused" else "allowed"
        case f.HookAborted():
            return f"{fact.hook}: {_short(fact.reason, 70)}"
        case f.ToolCallVetoed():
            return f"call #{fact.index} not run: {_short(fact.reason, 60)}"
        case f.ToolCallRewritten():
            return f"call #{fact.index} runs with ({_short(fact.args, 50)})"
        case f.ObservationRewritten():
            return f"call #{fact.index} -> {_short(fact.observation)}"
        case f.ObservationCommitted():
            return plural(len(fact.entries or ()) + len(fact.results or ()), "entry", "entries")
        case f.HistoryCompressed():
            replaced = plural(fact.replaced, "entry", "entries")
            return f"{replaced} -> {_short(fact.summary.observation)!r}"
        case f.ReflectionSkipped():
            return fact.reason
        case f.ContextLimitReached():
            counted = f" ({fact.provider} counted by the provider)" if fact.provider else ""
            return f"request of about {fact.tokens} tokens{counted} > limit {fact.limit}"
        case f.ContextCompacted():
            return _compaction(fact)
        case f.AnswerRejected():
            return f"{fact.reason}: {_short(fact.content)!r}"
        case f.FinalAnswerProduced():
            return _short(fact.content, 80)
        case f.RunFailed():
            return f"{fact.reason}: {_short(fact.message, 80)}"
        case f.Transitioned():
            return f"{fact.from_state} --{fact.event}--> {fact.to_state}"
        case f.RunFinished():
            return f"{fact.status}: {_short(fact.final_answer or fact.error or '', 70)}"
        case f.RunBranched():
            changes = ", ".join(fact.changes) or "no change"
            return f"from {fact.parent_id} at seq {fact.parent_seq}: {changes}"
        case f.PatchMarked():
            return f"new code for {fact.change_id!r}"
        case f.ValueDrawn():
            return f"{fact.source} = {fact.value!r}"
        case f.RunAborted():
            return f"{fact.error_type}: {_short(fact.message, 80)}"
        case f.CandidatesGathered():
            ended = ", ".join(f"#{c.index} {c.run_id} {c.status}" for c in fact.candidates)
            return f"from {fact.parent_id} at seq {fact.parent_seq}, judge {fact.judge}: {ended}"
        case f.JudgeAsked():
            return f"model={fact.model or '(default)'} prompt {_short(fact.prompt, 50)!r}"
        case f.JudgeAnswered():
            spent = fact.response.usage
            tokens = f" tokens={spent.total_tokens}" if spent else ""
            return f"{_short(fact.response.content or '')!r}{tokens}"
        case f.CandidatePicked():
            label = f" ({fact.label})" if fact.label else ""
            why = f": {_short(fact.reason, 50)}" if fact.reason else ""
            return f"#{fact.index} {fact.run_id}{label}{why}"
        case f.PickRefused():
            return f"{fact.reason}: {_short(fact.message, 80)}"
        case f.UnknownFact():
            return f"(type not registered here) {_fields(fact.payload)}"
    return _fields(fact.model_dump(mode="json", exclude={"kind"}))  # a user's own fact


def _compaction(fact: f.ContextCompacted) -> str:
    cuts = []
    if fact.truncated:
        n = len(fact.truncated)
        cuts.append(f"{n} output{'s' if n != 1 else ''} cut to {fact.max_lines} lines")
    if fact.dropped is not None:
        n = fact.dropped[1] - fact.dropped[0]
        cuts.append(f"{n} entr{'ies' if n != 1 else 'y'} dropped")
    if fact.max_chars is not None:
        cuts.append(f"outputs cut to {fact.max_chars} characters")
    return f"{fact.tokens_before} -> {fact.tokens_after} tokens (limit {fact.limit}): " + (
        ", ".join(cuts)
    )


def _fields(data: dict[str, Any]) -> str:
    """A user's fact in one line: its fields as name=value."""
    shown = (
        f"{k}={_short(v, 40)!r}" if isinstance(v, str) else f"{k}={_short(v, 40)}"
        for k, v in data.items()
        if k != "kind"
    )
    return " ".join(shown)
