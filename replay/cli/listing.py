"""`agentsm search` and `stats`: what the facts of a log say, searched and counted (`runs`, the
catalog, is `runs`; its names are importable from here too)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

import click

from agentsm import facts as f
from agentsm.tables import Column
from agentsm.trace import decode
from eventstore import EventStore, Searchable, StoreError, open_store
from eventstore.pg_url import is_postgres_url

from ..errors import UsageError
from ..opening import can_write
from .common import (
    Listing,
    common,
    db_path,
    echo,
    example,
    format_options,
    limit_option,
    open_log,
    parse_since,
    plural,
    shown,
)
from .runs import STATUSES, run_record, runs, select

__all__ = ["SEARCHED", "STATUSES", "run_record", "runs", "search", "select", "stats"]

SEARCHED = (
    "RunStarted",
    "LlmResponded",
    "ToolExecuted",
    "FinalAnswerProduced",
    "AnswerRejected",
    "RunFailed",
    "RunAborted",
    "LlmFailed",
    "HumanDecided",
    "HistoryCompressed",
    "JudgeAnswered",
    "CandidatePicked",
)
"""The facts `agentsm search` looks in: tasks, LLM text, observations, answers, errors, what
best-of judges answered and picked."""


@click.command(
    epilog=example(
        "agentsm search 'capital France'",
        "agentsm search 'inhab* \"rate limit\" bob@example.com'",
        "agentsm search timeout -n 100 --json",
    )
)
@click.argument("text")
@limit_option("facts")
@format_options
@common
def search(text: str, limit: int, fmt: str | None) -> None:
    """Full-text search over tasks, LLM answers, tool observations and errors: the facts
    holding every word (case and accents aside; a "quoted phrase" or an address as words in a
    row, prefix* for any ending), best first, with their runs and matching text."""
    store = _open_to_index()
    if not isinstance(store, Searchable):
        raise UsageError(
            f"{shown(db_path())} has no full-text search; point --db at a log that does."
        )
    hits = store.search(text, kinds=SEARCHED, limit=limit or sys.maxsize)
    missed = store.unindexed()  # a writable log was brought up to date by the search
    if missed:
        click.echo(
            f"agentsm: note: {plural(missed, 'fact')} of this log are not in its search index "
            "yet (it is read-only for you), so they were read one by one: search it once with "
            "write access to index them.",
            err=True,
        )
    if not hits and fmt is None:
        click.echo(f"Nothing matches {shown(text)!r} in {shown(db_path())}.")
        return
    listing = Listing(
        (Column("run"), Column("seq", "right"), Column("fact"), Column("match", flexible=True)),
        ("run_id", "seq", "kind", "snippet"),
    )
    for run_id, seq, kind, snippet in hits:
        listing.add(
            {"run_id": run_id, "seq": seq, "kind": kind, "snippet": snippet},
            [run_id, str(seq), kind, _around_match(snippet)],
        )
    listing.emit(fmt)
    if fmt is None:
        runs_hit = len({h[0] for h in hits})
        click.echo(f"\n{plural(len(hits), 'fact')} in {plural(runs_hit, 'run')}", err=True)


def _open_to_index() -> EventStore:
    """The log, writable when this user may write it (its search indexes the facts logged
    since the last one): a SQLite file they may write, or a PostgreSQL log they may write to
    (else read-only)."""
    path = db_path()
    if is_postgres_url(path):
        try:
            return open_store(path, create=False)
        except StoreError:
            pass  # not allowed to write (or to migrate it): a reader searches it as it is
    return open_log(write=can_write(path))


def _around_match(snippet: str, before: int = 24) -> str:
    """The snippet from a word or so before its first match, so that a cut table cell shows
    it."""
    at = snippet.find("[")
    if at <= before:
        return snippet
    space = snippet.find(" ", at - before, at)
    return "…" + snippet[space + 1 if space >= 0 else at :]


_NAMING = ("LlmResponded", "ToolCallsPlanned", "ToolCallStarted", "ObservationCommitted")
"""The facts that tell which tool a result names by its place (a plan may name the calls of
the plan response before it)."""


def _follow_names(names: tuple[list[str], list[str], list[str]], fact: Any) -> None:
    """Keep a run's offered and planned tools and its handlers' own calls up to date with
    `fact`."""
    offered, planned, own = names
    if isinstance(fact, f.LlmResponded):
        if fact.purpose == "plan":
            offered[:] = [c.name for c in fact.response.calls]
    elif isinstance(fact, f.ToolCallsPlanned | f.ObservationCommitted):
        planned[:] = []
        if isinstance(fact, f.ToolCallsPlanned):
            planned[:] = offered if fact.calls is None else [c.name for c in fact.calls]
        own.clear()
    elif isinstance(fact, f.ToolCallStarted) and fact.call is not None:
        if fact.index is None and fact.call.name in planned:
            return  # a log from before version 2: a planned call, written in full
        own.append(fact.call.name)


def _stats(store: EventStore, since: float | None) -> dict[str, Any]:
    records = store.runs(since=since)
    tools: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    durations: dict[str, list[float]] = {}
    wanted = ("ToolExecuted", "RunFailed", "RunAborted", "LlmFailed")
    whole = (*_NAMING, "JudgeAnswered")  # read for whole runs, as their summaries count
    if isinstance(store, Searchable):  # one pass over the log
        events = store.events_of(wanted, since=since) + store.events_of(whole)
        events.sort(key=lambda e: (e.run_id, e.seq))
    else:
        events = [e for r in records for e in store.read(r.run_id) if e.kind in wanted + whole]
    names: dict[str, tuple[list[str], list[str], list[str]]] = {}  # per run: the response's
    # tools, the plan's, the handlers' own
    counted = {r.run_id for r in records}
    cached = Counter[str]()  # prompt-cache reads and writes of the runs counted
    for event in events:
        if event.kind in whole:
            named = decode(event)
            usage = getattr(getattr(named, "response", None), "usage", None)
            if usage is not None and event.run_id in counted:
                cached["read"] += usage.cache_read_tokens
                cached["write"] += usage.cache_write_tokens
            if event.kind in _NAMING:
                _follow_names(names.setdefault(event.run_id, ([], [], [])), named)
            continue
        if since is not None and event.recorded_at < since:
            continue
        fact: Any = decode(event)
        if event.kind == "ToolExecuted":
            name = fact.call.name if fact.call is not None else None
            if name is None:  # named by its place in the step
                _, planned, own = names.get(event.run_id, ([], [], []))
                at = fact.index - len(planned)
                name = planned[fact.index] if at < 0 else own[at] if at < len(own) else "?"
            tools[name] += 1
            if not fact.success:
                failures[name] += 1
                errors[f"tool {fact.error_type or 'failure'}"] += 1
            ms = event.meta.get("metrics", {}).get("duration_ms")
            if isinstance(ms, int | float):
                durations.setdefault(name, []).append(float(ms))
        elif event.kind == "RunFailed":
            errors[f"run {fact.reason}"] += 1
        else:
            errors[f"{'llm' if event.kind == 'LlmFailed' else 'abort'} {fact.error_type}"] += 1
    slowest = sorted(
        ((name, max(ms), sum(ms) / len(ms)) for name, ms in durations.items()),
        key=lambda t: t[1],
        reverse=True,
    )
    costs = [r.summary.cost for r in records if r.summary.cost is not None]
    return {
        "runs": len(records),
        "status": dict(Counter(r.shown_status for r in records).most_common()),
        "model": dict(Counter(r.summary.model or "(default)" for r in records).most_common()),
        "input_tokens": sum(r.summary.input_tokens for r in records),
        "output_tokens": sum(r.summary.output_tokens for r in records),
        "cache_read_tokens": cached["read"],
        "cache_write_tokens": cached["write"],
        "cost": round(sum(costs), 6) if costs else None,
        "tools": {n: {"calls": c, "failures": failures[n]} for n, c in tools.most_common()},
        "errors": dict(errors.most_common()),
        "slowest_tools": [
            {"tool": n, "max_ms": round(top, 1), "mean_ms": round(mean, 1)}
            for n, top, mean in slowest[:10]
        ],
    }


@click.command(
    epilog=example("agentsm stats --since 1d", "agentsm stats --since 2026-11-22 --json")
)
@click.option("--since", metavar="WHEN", help="runs with facts within a duration (2h, 1d) or since")
@click.option("--json", "as_json", is_flag=True, help="the figures as one JSON object")
@common
def stats(since: str | None, as_json: bool) -> None:
    """What happened over a time window: runs by status and model, tokens (prompt-cache reads
    and writes apart) and cost, tool calls and failures, error classes, and the slowest tools."""
    figures = _stats(open_log(), parse_since(since))
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    window = f" since {since}" if since else ""
    lines = [f"{plural(figures['runs'], 'run')}{window} in {shown(db_path())}"]

    def counts(title: str, values: dict[str, Any]) -> None:
        if values:
            lines.append(f"{title}: " + ", ".join(f"{shown(k)} {v}" for k, v in values.items()))

    counts("status", figures["status"])
    counts("model", figures["model"])
    cost = f", cost ${figures['cost']:.4f}" if figures["cost"] is not None else ""
    read, written = figures["cache_read_tokens"], figures["cache_write_tokens"]
    cache = f"; cache read {read}, written {written}" if read or written else ""
    lines.append(
        f"tokens: {figures['input_tokens'] + figures['output_tokens']} "
        f"(in {figures['input_tokens']}, out {figures['output_tokens']}{cache}){cost}"
    )
    tools = {
        n: f"{plural(t['calls'], 'call')}" + (f" ({t['failures']} failed)" if t["failures"] else "")
        for n, t in figures["tools"].items()
    }
    counts("tools", tools)
    counts("errors", figures["errors"])
    if figures["slowest_tools"]:
        lines.append(
            "slowest tools: "
            + ", ".join(
                f"{shown(t['tool'])} {t['max_ms']:.0f} ms (mean {t['mean_ms']:.0f})"
                for t in figures["slowest_tools"][:5]
            )
        )
    echo("\n".join(lines))
    sys.stdout.flush()
