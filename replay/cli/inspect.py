"""`agentsm show`, `memory`, `diff`, `verify`, `export`, `import`, `backup` and the pictures:
reading one run (or copying it) without changing it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from agentsm import facts as f
from agentsm.custom import registered_facts
from agentsm.marks import subagent_of
from agentsm.tables import Column
from agentsm.text import shortened
from agentsm.threads import thread_mark
from agentsm.trace import TRACE_COLUMNS, decode
from eventstore import SQLiteEventStore, StoreError, open_store
from eventstore.pg_url import is_postgres_url

from ..conversation import conversation_at
from ..diffing import diff_runs
from ..errors import UsageError
from ..judgement import family_notes, judgement_lines
from ..recording import Recording
from ..render import printable
from ..source import agent_of, resolve_run
from ..timetravel import memory_at
from ..transfer import export_run, import_runs
from .common import (
    Listing,
    common,
    db_path,
    did_you_mean,
    echo,
    example,
    format_options,
    get_builder,
    open_log,
    out,
    output_format,
    plural,
    status_cell,
)

__all__ = ["COMMANDS"]


@click.command(
    epilog=example(
        "agentsm show 3f2a",
        "agentsm show 3f2a --kind ToolExecuted --step 2 --full",
        "agentsm show 3f2a --json > run.jsonl",
    )
)
@click.argument("run")
@click.option("--kind", "kinds", multiple=True, metavar="FACT", help="only facts of this kind")
@click.option("--step", type=int, metavar="N", help="only facts of step N")
@click.option("--full", is_flag=True, help="each fact in full (JSON), not its one-line summary")
@click.option("--json", "as_json", is_flag=True, help="JSON lines, one per fact (full facts)")
@click.option("--csv", "as_csv", is_flag=True, help="the table as CSV")
@common
def show(
    run: str, kinds: tuple[str, ...], step: int | None, full: bool, as_json: bool, as_csv: bool
) -> None:
    """Print a run's trace: one line per fact (seq, step, state, fact, summary)."""
    output_format(as_json, as_csv)
    store = open_log()
    recording = Recording.load(store, run)
    known = {e.event for e in recording.entries} | set(f.FACTS.versions)
    unknown = sorted(set(kinds) - known)
    if unknown:
        raise UsageError(
            f"--kind {', '.join(unknown)}: no such fact.{did_you_mean(unknown[0], known)} The "
            f"kinds are {', '.join(sorted(f.FACTS.versions))}."
        )
    steps = [e.step for e in recording.entries]
    if step is not None and step not in steps:
        raise UsageError(
            f"Run {recording.run_id} has steps {min(steps)}..{max(steps)}; --step {step} is not "
            f"one of them: give a step from {min(steps)} to {max(steps)}."
        )
    entries = [
        e
        for e in recording.entries
        if (not kinds or e.event in kinds) and (step is None or e.step == step)
    ]
    if as_json:
        for e in entries:
            click.echo(json.dumps(e.to_dict(), ensure_ascii=False))
        return
    r = recording.run
    if not as_csv:
        status = status_cell(r.shown_status)
        head = out(f"run {r.run_id}", "bold") + "  " + out(status.text, status.style)
        click.echo(f"{head}  task: {printable(r.task)}")
        tool = subagent_of(r)
        if tool is not None:
            click.echo(
                f"sub-agent run ({printable(tool)}) of {printable(r.parent_id or '')}, started "
                f"by its call at seq {r.branch_seq}"
            )
        elif (turn := thread_mark(r)) is not None:
            after = f", after run {printable(r.parent_id)}" if r.parent_id else ""
            click.echo(f"turn {turn['turn']} of thread {printable(turn['id'])}{after}")
        elif r.parent_id and not r.info.get("judgement"):
            click.echo(f"branched from {printable(r.parent_id)} at seq {r.branch_seq}")
        for line in judgement_lines(store, r):
            click.echo(printable(line))
    if full and not as_csv:
        blocks = []
        for e in entries:
            body = json.dumps(e.fact.model_dump(mode="json"), indent=2, ensure_ascii=False)
            title = out(f"seq {e.seq}  step {e.step}  {e.state}  {e.event}", "bold")
            blocks.append(f"{title}\n{printable(body, lines=True)}")
        echo("\n\n".join(blocks) if blocks else "No facts match.")
        return
    listing = Listing(TRACE_COLUMNS, ("seq", "step", "state", "fact", "data"))
    for e in entries:
        listing.add(
            {"seq": e.seq, "step": e.step, "state": e.state, "fact": e.event, "data": e.data},
            [str(e.seq), str(e.step), e.state, e.event, e.data],
        )
    listing.emit("csv" if as_csv else None)


@click.command(
    epilog=example("agentsm memory 3f2a --at 17", "agentsm memory 3f2a --at 17 --messages")
)
@click.argument("run")
@click.option(
    "--at", "--seq", "at", type=int, metavar="SEQ", help="sequence number (default: the last)"
)
@click.option("--messages", is_flag=True, help="the conversation the LLM is sent at that point")
@click.option("--json", "as_json", is_flag=True, help="the whole memory as JSON")
@common
def memory(run: str, at: int | None, messages: bool, as_json: bool) -> None:
    """A run's memory and state at a sequence number, rebuilt by folding its log up to it."""
    store = open_log()
    run_id = resolve_run(store, run)
    seq = at if at is not None else store.run(run_id).last_seq
    mem, state = memory_at(store, run_id, seq)
    if messages:
        conversation = conversation_at(store, run_id, seq)
        sent = conversation.messages
        if as_json:
            click.echo(json.dumps(sent, indent=2, ensure_ascii=False))
            return
        head = f"run {run_id} at seq {seq}: {plural(len(sent), 'message')}, {conversation.note}"
        lines: list[str] = [out(head, "bold")]
        for m in sent:
            lines.append(out(f"[{m['role']}]", "cyan"))
            for part in m.get("reasoning") or ():
                said = printable(part["text"], lines=True) if part["text"] else "(no text)"
                whose = printable(part["provider"] or "any")
                lines.append(out(f"({part['kind']}, {whose}) {said}", "dim"))
            if m.get("content"):
                lines.append(printable(m["content"], lines=True))
            for call in m.get("tool_calls", []) or []:
                lines.append(printable(f"→ {json.dumps(call, ensure_ascii=False)}"))
        echo("\n".join(lines))
        return
    if as_json:
        click.echo(
            json.dumps(
                {"seq": seq, "state": str(state), "memory": mem.model_dump(mode="json")},
                indent=2,
            )
        )
        return
    lines = [out(f"run {run_id} at seq {seq}: state {state}", "bold")]
    fields = [
        ("task", mem.task),
        ("step", mem.step),
        ("retry_count", mem.retry_count),
        ("tokens", mem.total_usage.total_tokens),
        ("final_answer", mem.final_answer),
        ("error", mem.error),
        (
            "planned_calls",
            ", ".join(
                f"{c.name}({json.dumps(c.args, ensure_ascii=False)})" for c in mem.planned_calls
            ),
        ),
        ("pending_approval", ", ".join(mem.pending_approval)),
    ]
    for name, value in fields:
        if value not in (None, ""):
            lines.append(f"  {name:<16} {printable(value)}")
    parts = mem.model_dump(mode="json", include={"parts"})["parts"]
    unfolded = _unfolded_kinds(store, run_id) if parts else {}
    for name, value in parts.items():  # the user's own parts (their facts' reducers)
        shown = json.dumps(value, ensure_ascii=False)
        note = ""
        if unfolded.get(name):  # as it began: its facts were read here, not folded
            note = out(f"  (not folded: {', '.join(unfolded[name])} not registered here)", "dim")
        lines.append(f"  {'part ' + name:<16} {printable(shortened(shown, 200))}{note}")
    lines.append(f"  history ({plural(len(mem.history), 'entry', 'entries')})")
    for entry in mem.history:
        mark = out("ok ", "green") if entry.success else out("err", "red")
        call = printable(f"{entry.tool.name}({json.dumps(entry.tool.args, ensure_ascii=False)})")
        said = printable(shortened(entry.observation, 80))
        lines.append(f"    [{entry.step}] {mark} {call} -> {said}")
    echo("\n".join(lines))


def _unfolded_kinds(store: Any, run_id: str) -> dict[str, list[str]]:
    """Each user part's fact kinds that this process has no reducer for (its facts read as
    UnknownFact and leave the part as it began), from the run's definition."""
    first = store.read(run_id, upto=1)
    definition = decode(first[0]) if first else None
    if not isinstance(definition, f.RunStarted) or not definition.custom_facts:
        return {}
    known = registered_facts()
    unfolded: dict[str, list[str]] = {}
    for kind, part in definition.custom_facts.items():
        if kind not in known:
            unfolded.setdefault(str(part), []).append(kind)
    return unfolded


@click.command(epilog=example("agentsm diff 3f2a 9c1e"))
@click.argument("run_a")
@click.argument("run_b")
@common
def diff(run_a: str, run_b: str) -> None:
    """Where two runs part, and how each ends."""
    echo(printable(diff_runs(open_log(), run_a, run_b), lines=True))


@click.command(epilog=example("agentsm verify 3f2a", "agentsm verify --all"))
@click.argument("run", required=False)
@click.option("--all", "every", is_flag=True, help="check every run of the log")
@common
def verify(run: str | None, every: bool) -> None:
    """Check the hash chain of a run's facts: intact, or the first broken link (exit 0/1)."""
    store = open_log()
    if not every and not run:
        raise UsageError("verify needs a RUN id, or --all to check every run of the log.")
    run_ids = [r.run_id for r in store.runs()] if every else [resolve_run(store, run or "")]
    broken = 0
    for run_id in run_ids:
        try:
            report = store.verify(run_id)
            said, ok = str(report), report.ok
        except StoreError as e:  # a run whose log cannot even be read: broken, and on to the next
            if not every:
                raise
            said, ok = f"run {run_id}: cannot be checked: {e}", False
        if ok:
            click.echo(printable(said))
        else:
            broken += 1
            click.echo(out(printable(said), "red", "bold"))
    if every:
        click.echo(
            f"\n{plural(len(run_ids), 'run')} verified: {len(run_ids) - broken} intact, "
            f"{broken} broken"
        )
    sys.exit(1 if broken else 0)


@click.command(epilog=example("agentsm export 3f2a > run.jsonl"))
@click.argument("run")
@common
def export(run: str) -> None:
    """Write a run as JSON lines (its catalog entry, then one line per fact)."""
    for line in export_run(open_log(), run):
        click.echo(line)


@click.command(
    name="import",
    epilog=example("agentsm import run.jsonl --db other.db", "cat run.jsonl | agentsm import -"),
)
@click.argument("file")
@common
def import_(file: str) -> None:
    """Add the runs of a JSON lines export to the log (all of them, or none)."""
    db = db_path()
    lines = sys.stdin.read() if file == "-" else Path(file).read_text()
    name = "standard input" if file == "-" else file
    created = "://" not in db and db != ":memory:" and not Path(db).exists()
    store = open_store(db)
    try:
        known = {r.run_id for r in store.runs()}
        imported = import_runs(store, lines.splitlines(), name=name)
    except BaseException:
        store.close()
        if created:  # a refused import leaves no database it made behind
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(db + suffix).unlink(missing_ok=True)
        raise
    for run_id in imported:
        click.echo(f"{'already there' if run_id in known else 'imported'} {printable(run_id)}")


@click.command(epilog=example("agentsm backup runs-copy.db --db runs.db"))
@click.argument("dest")
@common
def backup(dest: str) -> None:
    """Copy the log, live or not, into a new file (one consistent snapshot)."""
    if is_postgres_url(db_path()):
        raise UsageError(f"backup copies SQLite logs; for this log use: agentsm copy --to {dest}")
    with SQLiteEventStore(db_path(), read_only=True) as store:
        store.backup(dest)
    click.echo(f"backed up {printable(db_path())} to {printable(dest)}")


def _draw(picture: Callable[[], Any], out_file: str) -> None:
    """Draw a picture and save it, or say how to install matplotlib when it is missing."""
    from agentsm.pictures import save

    try:
        written = save(picture(), out_file)
    except ImportError as e:
        if not (e.name or "").startswith("matplotlib"):
            raise
        raise UsageError(
            "Drawing pictures needs matplotlib: pip install 'agentsm[pictures]'."
        ) from e
    click.echo(f"wrote {written}")


@click.command(epilog=example("agentsm graph 3f2a --out run.svg", "agentsm graph"))
@click.argument("run", required=False)
@click.option("--out", "out_file", metavar="FILE", help=".svg or .png (image), .mmd (Mermaid)")
@click.option("--builder", metavar="MODULE:FACTORY", help="your agent, for its own table")
@common
def graph(run: str | None, out_file: str | None, builder: str | None) -> None:
    """The transition table as a state diagram, with a run's path (Mermaid text, or an image)."""
    from agentsm import build_transition_table
    from agentsm.pictures import path_of, state_diagram, to_mermaid

    make = get_builder(builder)
    path = None
    title = "transition table"
    task = "graph"
    if run:
        store = open_log()
        recording = Recording.load(store, run)
        path = path_of(e.fact for e in recording.entries)
        title = f"run {recording.run_id}: the path it took"
        task = recording.definition.task
        if make is not None:  # a sub-agent run's table is its child agent's
            make = agent_of(store, recording.definition, make)
    table = make(task).build_table() if make is not None else build_transition_table()
    if not out_file or out_file.endswith((".mmd", ".md")):
        text = to_mermaid(table, path)
        if out_file:
            Path(out_file).write_text(text + "\n")
            click.echo(f"wrote {out_file}")
        else:
            click.echo(printable(text, lines=True))
        return
    _draw(lambda: state_diagram(table, path, title), out_file)


@click.command(
    epilog=example(
        "agentsm timeline 3f2a",
        "agentsm timeline 3f2a --out run.png",
        "agentsm timeline 3f2a --json",
    )
)
@click.argument("run")
@click.option(
    "--out", "out_file", metavar="FILE", help=".svg or .png; without it, the timeline as text"
)
@format_options
@common
def timeline(run: str, out_file: str | None, fmt: str | None) -> None:
    """A run's timeline: states, tool calls, tokens, durations. Printed as a table, one line
    per stretch of facts in one state (seqs, step, state, tools run, tokens, milliseconds), or
    drawn with --out."""
    from agentsm.pictures import stretches
    from agentsm.pictures import timeline as draw

    if out_file and fmt:
        raise UsageError(f"give --out or --{fmt}, not both.")
    recording = Recording.load(open_log(), run)
    title = f"run {recording.run_id}: {recording.run.task}"
    if out_file:
        _draw(lambda: draw(list(recording.entries), title), out_file)
        return
    listing = Listing(TIMELINE_COLUMNS, TIMELINE_KEYS)
    for s in stretches(list(recording.entries)):
        seqs = f"{s.first}-{s.last}" if s.last > s.first else str(s.first)
        tools = ", ".join(s.tools)
        record = {"first": s.first, "last": s.last, "step": s.step, "state": s.state}
        listing.add(
            record | {"tools": list(s.tools), "tokens": s.tokens, "ms": round(s.ms, 3)},
            [seqs, str(s.step), s.state, tools, str(s.tokens or ""), f"{s.ms:.1f}" if s.ms else ""],
        )
    if fmt is None:
        click.echo(printable(title))
    listing.emit(fmt)


TIMELINE_COLUMNS = (
    Column("seq"),
    Column("step", "right"),
    Column("state"),
    Column("tools", flexible=True),
    Column("tokens", "right"),
    Column("ms", "right"),
)
TIMELINE_KEYS = ("first", "last", "step", "state", "tools", "tokens", "ms")


@click.command(epilog=example("agentsm family 3f2a --out family.png"))
@click.argument("run")
@click.option("--out", "out_file", required=True, metavar="FILE", help=".svg or .png")
@common
def family(run: str, out_file: str) -> None:
    """A run's family as a tree (its branches, and its sub-agent runs on dashed edges), each
    run labelled with its answer or error."""
    from agentsm.pictures import family_tree

    store = open_log()
    run_id = resolve_run(store, run)
    records = store.runs()
    labels = {r.run_id: r.summary.answer or r.summary.error or "" for r in records}
    for marked, note in family_notes(store, records).items():  # best of N: the pick marked
        labels[marked] = f"{note}: {labels.get(marked, '')}"
    _draw(lambda: family_tree(store, run_id, labels), out_file)


COMMANDS = [show, memory, diff, verify, export, import_, backup, graph, timeline, family]
