"""What the web viewer shows of a log, as plain JSON-ready data: a run with its facts, its
timeline, its path on the state diagram, its branch family, and two runs compared."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from agentsm import State, build_transition_table
from agentsm import facts as f
from agentsm.memory import fold_with_state
from agentsm.pictures.diagram import path_of
from agentsm.pictures.family import family_of
from agentsm.pictures.layout import lay_out
from agentsm.states.waiting import human_requests
from agentsm.subagent import subagent_of, with_waiting_children
from agentsm.threads import thread_mark
from agentsm.trace import TraceEntry
from agentsm.types import TERMINAL_STATES
from eventstore import EventStore, RunRecord

from ..cli.listing import run_record
from ..diffing import diff_runs
from ..recording import Recording

__all__ = [
    "diagram_of",
    "diff_of",
    "entry_of",
    "lineage_of",
    "record_of",
    "run_detail",
    "timeline_of",
    "waiting_of",
]

Table = Mapping[tuple[str, str], str]
_CHAR = 0.62  # average glyph width as a fraction of the font size (sans-serif)
STATE_FONT = 13.0
LABEL_FONT = 10.0


def entry_of(e: TraceEntry) -> dict[str, Any]:
    """One fact as the page lists it: envelope, one-line summary, measurements, the fact."""
    return {
        "seq": e.seq,
        "step": e.step,
        "state": e.state,
        "kind": e.event,
        "summary": e.data,
        "timestamp": e.timestamp,
        "metrics": e.metrics,
        "fact": e.fact.model_dump(mode="json"),
    }


def record_of(record: RunRecord) -> dict[str, Any]:
    """A run as the viewer lists it: what `agentsm runs --json` gives, and its place in a
    thread (`thread`: id, turn, previous, previous_seq, branched_from), None for a run that is
    no turn."""
    return {**run_record(record), "thread": thread_mark(record)}


def waiting_of(store: EventStore, recording: Recording) -> tuple[str, list[dict[str, Any]]]:
    """Where a run stands now: its state, and what it waits on, as `replay.pending_requests`
    gives it (decisions on calls, answers to questions), numbered from 1 as the CLI's #N."""
    if not recording.entries:
        return "Idle", []
    memory, state = fold_with_state(e.fact for e in recording.entries)
    asking = with_waiting_children(store, human_requests(recording.run_id, memory, state))
    return str(state), [
        {
            "number": n,
            "call_id": r.call.id,
            "name": r.call.name,
            "args": r.call.args,
            "reason": r.reason,
            "kind": r.kind,
        }
        for n, r in enumerate(asking, start=1)
    ]


def run_detail(store: EventStore, run_id: str) -> dict[str, Any]:
    """A run's catalog entry, where it stands now (state, what it waits on, as
    `replay.pending_requests` gives it: decisions on calls, answers to questions) and its
    facts."""
    recording = Recording.load(store, run_id)
    state, waiting = waiting_of(store, recording)
    return {
        "run": record_of(recording.run),
        "last_seq": recording.run.last_seq,
        "state": state,
        "waiting": waiting,
        "facts": [entry_of(e) for e in recording.entries],
    }


def _size(text: str, font: float, pad: float) -> tuple[float, float]:
    lines = text.split("\n")
    width = max(len(line) for line in lines) * font * _CHAR + 2 * pad
    return width, len(lines) * font * 1.25 + 2 * pad


def table_of(recording: Recording, table: Table | None = None) -> dict[tuple[str, str], str]:
    """The table the run ran under: the user's (from `--builder`) or the default one, with
    every row the run took (a custom table's rows are in the log, and win over the default
    ones they replace)."""
    rows = {(str(s), str(e)): str(d) for (s, e), d in (table or build_transition_table()).items()}
    for e in recording.entries:
        if isinstance(e.fact, f.Transitioned):
            rows[(e.fact.from_state, e.fact.event)] = e.fact.to_state
    return rows


def table_note(recording: Recording, table: Table | None) -> str:
    """Where the diagram's rows come from, in words."""
    if table is not None:
        return "The table of your agent (--builder), with the rows this run took."
    if recording.entries and recording.definition.custom_table:
        return (
            "This run had its own table: shown are the rows it took on the default table; "
            "start agentsm ui with --builder to see all of yours."
        )
    return "The default table, with the rows this run took."


def diagram_of(recording: Recording, table: Table | None = None) -> dict[str, Any]:
    """The state diagram laid out in layers (points), with the rows the run took and how
    often, and the run's path: every transition in order with its seq."""
    rows = table_of(recording, table)
    taken = path_of(e.fact for e in recording.entries)
    edges: dict[tuple[str, str], list[str]] = {}
    for (src, event), dst in rows.items():
        edges.setdefault((src, dst), []).append(event)
    counts: Counter[tuple[str, str]] = Counter()
    for (src, _, dst), n in taken.items():
        counts[(src, dst)] += n
    labels = {
        edge: "\n".join(events) + (f" ×{counts[edge]}" if counts[edge] else "")
        for edge, events in edges.items()
    }
    states = sorted({str(State.Idle), *(s for s, _ in rows), *rows.values()})
    placed = lay_out(
        {s: _size(s, STATE_FONT, 8.0) for s in states},
        {edge: _size(text, LABEL_FONT, 3.0) for edge, text in labels.items()},
    )
    (x0, y0), (x1, y1) = placed.bounds(margin=16.0)
    visited = {s for edge in counts for s in edge}
    path = [
        {"seq": e.seq, "from": e.fact.from_state, "event": e.fact.event, "to": e.fact.to_state}
        for e in recording.entries
        if isinstance(e.fact, f.Transitioned)
    ]

    def box(key: Any, centre: tuple[float, float]) -> dict[str, float]:
        w, h = placed.sizes[key]
        return {"x": centre[0] - x0, "y": centre[1] - y0, "w": w, "h": h}

    return {
        "width": x1 - x0,
        "height": y1 - y0,
        "states": [
            {
                "name": name,
                **box(name, placed.states[name]),
                "visited": name in visited,
                "terminal": name in {str(s) for s in TERMINAL_STATES},
            }
            for name in states
        ],
        "edges": [
            {
                "from": src,
                "to": dst,
                "events": events,
                "label": labels[(src, dst)],
                "taken": counts[(src, dst)],
                "box": box((src, dst), placed.labels[(src, dst)]),
                "points": [[x - x0, y - y0] for x, y in placed.routes[(src, dst)]],
            }
            for (src, dst), events in edges.items()
        ],
        "path": path,
        "note": table_note(recording, table),
    }


def timeline_of(entries: Sequence[TraceEntry]) -> dict[str, Any]:
    """The run in time: the states it was in, its LLM calls (tokens, latency) and its tool
    calls (duration, outcome), each with the seq of the fact that closed it; seconds from
    the run's first fact."""
    if not entries:
        return {"start": None, "end": None, "states": [], "llm": [], "tools": []}
    start = entries[0].timestamp
    states: list[dict[str, Any]] = []
    llm: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    current, since = str(State.Idle), start
    asked: float | None = None
    for e in entries:
        fact = e.fact
        if isinstance(fact, f.Transitioned):
            states.append({"state": current, "start": since - start, "end": e.timestamp - start})
            current, since = fact.to_state, e.timestamp
        elif isinstance(fact, f.LlmRequested):
            asked = e.timestamp
        elif isinstance(fact, f.LlmResponded | f.LlmFailed):
            latency = e.metrics.get("latency_ms")
            began = asked if asked is not None else e.timestamp
            usage = fact.response.usage if isinstance(fact, f.LlmResponded) else None
            llm.append(
                {
                    "seq": e.seq,
                    "start": began - start,
                    "end": e.timestamp - start,
                    "latency_ms": latency,
                    "input_tokens": usage.input_tokens if usage else 0,
                    "output_tokens": usage.output_tokens if usage else 0,
                    "ok": isinstance(fact, f.LlmResponded),
                }
            )
            asked = None
        elif isinstance(fact, f.ToolExecuted):
            ms = e.metrics.get("duration_ms")
            took = float(ms) / 1000 if isinstance(ms, int | float) else 0.0
            tools.append(
                {
                    "seq": e.seq,
                    "name": fact.call.name if fact.call else f"#{fact.index}",
                    "start": e.timestamp - took - start,
                    "end": e.timestamp - start,
                    "duration_ms": ms,
                    "success": fact.success,
                    "error_type": fact.error_type,
                }
            )
    end = entries[-1].timestamp
    states.append({"state": current, "start": since - start, "end": end - start})
    return {"start": start, "end": end, "states": states, "llm": llm, "tools": tools}


def lineage_of(store: EventStore, run_id: str) -> list[dict[str, Any]]:
    """The run's family from its root, depth first: each run with its depth, the seq of its
    parent where it parted (or, for a sub-agent run, `subagent`, the tool whose call at that
    seq started it; for a thread's turn, `thread`, its place) and the changes its RunBranched
    fact names."""
    out = []
    for record, depth in family_of(store, run_id):
        changes: list[str] = []
        if record.parent_id and subagent_of(record) is None and thread_mark(record) is None:
            upto = (record.branch_seq or 0) + 1  # RunBranched follows the parent's facts
            for e in Recording.load(store, record.run_id, upto=upto + 1).entries:
                if isinstance(e.fact, f.RunBranched):
                    changes = list(e.fact.changes)
        out.append({**record_of(record), "depth": depth, "changes": changes})
    return out


def diff_of(store: EventStore, run_a: str, run_b: str) -> dict[str, Any]:
    """Two runs compared (`agentsm diff`), with the facts of each from where they part."""
    d = diff_runs(store, run_a, run_b)
    a, b = Recording.load(store, d.a.run_id), Recording.load(store, d.b.run_id)
    div = d.divergence

    def side(recording: Recording, first: TraceEntry | None) -> list[dict[str, Any]]:
        if first is None:  # identical, or this run ends where they part
            return []
        return [
            entry_of(e)
            for e in recording.entries
            if e.seq >= first.seq and not isinstance(e.fact, f.RunBranched)
        ]

    summary_fields = ("state", "status", "steps", "tokens", "facts", "answer")
    return {
        "a": d.a.run_id,
        "b": d.b.run_id,
        "relation": d.relation,
        "parts_at": div.seq if div is not None else None,
        "outcomes": [
            {"field": name, "a": d.a.field(name), "b": d.b.field(name)} for name in summary_fields
        ],
        "facts_a": side(a, div.expected if div else None),
        "facts_b": side(b, div.actual if div else None),
        "text": str(d),
    }
