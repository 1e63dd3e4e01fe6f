"""`agentsm chat` and `agentsm threads`, and `--thread` on `show`, `replay` and `branch`:
conversations with an agent, as threads of runs (see `agentsm.threads`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from agentsm import AgentFailed, HumanInputRequired, Thread
from agentsm.tables import Column
from agentsm.threads import thread_mark, thread_messages, threads
from eventstore import EventStore, RunRecord

from ..errors import UsageError
from ..render import printable
from ..source import open_store
from ..threads import branch_thread, replay_thread, turns_of
from .common import (
    Listing,
    builder_option,
    common,
    db_path,
    echo,
    example,
    format_options,
    get_builder,
    limit_option,
    open_log,
    out,
    plural,
    shown,
    status_cell,
    when,
)

__all__ = ["COMMANDS", "add_thread_options"]

EXIT = "/exit"


@click.command(
    epilog=example(
        "agentsm chat --builder myagent:make_agent",
        "agentsm chat --builder myagent:make_agent --thread 7f3c2a9e01bd",
        "printf 'Hello\\nAnd in Celsius?\\n' | agentsm chat --builder myagent:make_agent",
    )
)
@click.option(
    "--thread", "thread_id", metavar="ID", help="continue this thread (default: a new one)"
)
@builder_option
@common
def chat(thread_id: str | None, builder: str | None) -> None:
    """Talk with your agent: each line you type is a message, each answer is printed, and every
    turn is recorded as a run of one thread (its id is shown first; continue it later with
    --thread). Reads lines from stdin, so it takes piped input too; /exit or end of input
    (Ctrl-D) ends it. Exit 3 when a turn waits for a human."""
    make = get_builder(builder, required=True)
    assert make is not None
    store = open_store(db_path(), create=True)
    thread = Thread.of(make, store, thread_id)
    stdin = sys.stdin
    interactive = stdin.isatty()
    so_far = len(thread.runs)
    said = f"{plural(so_far, 'turn')} so far" if so_far else "new"
    click.echo(f"agentsm: thread {shown(thread.id)} ({said})", err=True)
    if interactive:
        click.echo(f"Type a message; {EXIT} or Ctrl-D to leave.", err=True)
    while True:
        if interactive:
            click.echo(out("you> ", "bold"), nl=False, err=True)
        line = stdin.readline()
        if not line:
            break
        text = line.strip()
        if text == EXIT:
            break
        if not text:
            continue
        try:
            answer = thread.send(text)
        except AgentFailed as e:
            click.echo(f"agentsm: this turn failed: {printable(e.error)}", err=True)
            continue
        except HumanInputRequired as e:
            for request in e.requests:
                call = f"{request.call.name}({json.dumps(request.call.args, ensure_ascii=False)})"
                click.echo(printable(f"waiting: {call} — {request.reason}"), err=True)
            asked = any(request.kind == "question" for request in e.requests)
            how = (
                f"answer it (agentsm answer {shown(e.run_id)} TEXT)"
                if asked
                else f"decide it (agentsm approve {shown(e.run_id)})"
            )
            click.echo(
                f"agentsm: turn {len(thread.runs)} waits for a human: {how}, resume it, then "
                f"chat --thread {shown(thread.id)} again; the lines after this one were not "
                "sent.",
                err=True,
            )
            sys.exit(3)
        click.echo(printable(answer, lines=True))


THREAD_COLUMNS = (
    Column("thread"),
    Column("turns", "right"),
    Column("status"),
    Column("last message", flexible=True),
    Column("last answer / error", flexible=True),
    Column("updated", drop=2),
    Column("from", drop=1),
)

THREAD_KEYS = (
    "thread_id",
    "turns",
    "status",
    "last_run",
    "task",
    "answer",
    "error",
    "updated_at",
    "branched_from",
    "branch_turn",
)
"""The fields of a thread in `threads --json` and `--csv` (`last_run`: its last turn's run;
`branched_from`, `branch_turn`: the thread it was branched from and its first own turn)."""


@click.command(name="threads", epilog=example("agentsm threads", "agentsm threads -n 5 --json"))
@limit_option("threads, the last updated")
@format_options
@common
def threads_command(limit: int, fmt: str | None) -> None:
    """List the conversations of the log, the last updated last: each thread's turns, the
    status of its last turn, its last message and answer (read from the catalog; no run is
    folded). A branched thread says which thread and turn it came from."""
    store = open_log()
    found = threads(store)
    if limit:
        found = found[-limit:]
    if not found and fmt is None:
        click.echo(f"No threads in {shown(db_path())}; start one with agentsm chat.")
        return
    listing = Listing(THREAD_COLUMNS, THREAD_KEYS)
    for t in found:
        last = t.last
        s = last.summary
        origin = f"{t.branched_from}@{t.branch_turn}" if t.branched_from else ""
        listing.add(
            {
                "thread_id": t.thread_id,
                "turns": t.turns,
                "status": last.shown_status,
                "last_run": last.run_id,
                "task": last.task,
                "answer": s.answer,
                "error": s.error,
                "updated_at": last.updated_at,
                "branched_from": t.branched_from,
                "branch_turn": t.branch_turn,
            },
            [
                t.thread_id,
                str(t.turns),
                status_cell(last.shown_status),
                last.task,
                s.answer or (f"error: {s.error}" if s.error else ""),
                when(last.updated_at),
                origin,
            ],
        )
    listing.emit(fmt)


# -- --thread on show, replay and branch --------------------------------------------------


def _show_thread(
    store: EventStore, store_turns: Sequence[RunRecord], thread_id: str, as_json: bool
) -> None:
    said = thread_messages(store, [r.run_id for r in store_turns])
    if as_json:
        for message in said:
            click.echo(json.dumps(message, ensure_ascii=False))
        return
    own = [r for r in store_turns if (thread_mark(r) or {}).get("id") == thread_id]
    origin = (thread_mark(own[0]) or {}).get("branched_from") if own else None
    head = out(f"thread {thread_id}", "bold") + f"  {plural(len(store_turns), 'turn')}"
    if origin:
        first = (thread_mark(own[0]) or {}).get("turn")
        head += f"  (branched from thread {printable(origin)} at turn {first})"
    lines = [head]
    by_run = {r.run_id: r for r in store_turns}
    for message in said:
        record = by_run[message["run_id"]]
        if message["role"] == "user":
            status = status_cell(record.shown_status)
            lines.append(
                out(f"turn {message['turn']}", "bold")
                + f"  {printable(record.run_id)}  {out(status.text, status.style)}"
            )
            lines.append(_said("you", message["content"]))
        elif message.get("error") is not None:
            lines.append(out(_said("error", message["error"]), "red"))
        else:
            lines.append(_said("agent", message["content"] or ""))
    echo("\n".join(lines))


def _said(who: str, text: str) -> str:
    body = printable(text, lines=True).split("\n")
    return "\n".join([f"  {who}: {body[0]}", *(f"  {' ' * len(who)}  {b}" for b in body[1:])])


def _show(thread: str, as_json: bool, **_: Any) -> None:
    store = open_log()
    _show_thread(store, turns_of(store, thread), thread, as_json)


def _replay(thread: str, builder: str | None, execute_tools: bool, **_: Any) -> None:
    make = get_builder(builder)
    result = replay_thread(open_log(), thread, make, execute_tools=execute_tools)
    for n, report in enumerate(result.reports, 1):
        if report.identical:
            said = f"{out('identical', 'green')}  ({plural(report.compared, 'fact')})"
        elif report.divergence is None:
            said = f"{out('definition changed', 'yellow')}; behaviour identical"
        else:
            said = f"{out('DIVERGED', 'red', 'bold')}  at {printable(report.divergence.headline())}"
        click.echo(f"turn {n}  {printable(report.run_id)}  {said}")
    changed = [r for r in result.reports if not r.identical]
    for report in changed:
        click.echo("\n" + printable(str(report), lines=True))
    click.echo(
        f"\nthread {shown(thread)}: {plural(len(result.reports), 'turn')} replayed, "
        f"{len(result.reports) - len(changed)} identical"
    )
    sys.exit(0 if result.identical else 1)


def _branch(
    thread: str,
    turn: int | None,
    message: str | None,
    builder: str | None,
    as_json: bool,
    **_: Any,
) -> None:
    if turn is None or message is None:
        raise UsageError(
            "branch --thread needs --turn N (the turn to replace, from 1) and --message TEXT "
            "(the other message)."
        )
    make = get_builder(builder, required=True)
    assert make is not None
    result = branch_thread(open_log(write=True), thread, turn, message, make)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        status = status_cell(result.status)
        click.echo(
            f"thread {printable(result.thread_id)}  (from thread {printable(thread)} at turn "
            f"{turn})  turn {turn}: run {printable(result.run_id)}  "
            + out(status.text, status.style)
        )
        if result.answer is not None:
            click.echo(printable(result.answer, lines=True))
        elif result.error is not None:
            click.echo(out(f"failed: {printable(result.error)}", "red"))
        else:
            click.echo(f"it waits for a human: agentsm approve {printable(result.run_id)}")
    sys.exit(0 if result.status == "done" else 3 if result.status == "waiting" else 1)


THREAD_HELP = "the thread of this id instead of a run (see agentsm threads)"


def _with_thread(
    command: click.Command,
    handler: Callable[..., None],
    extra: Sequence[click.Option] = (),
    *,
    allowed: Sequence[str] = (),
    examples: Sequence[str] = (),
) -> None:
    """Give `command` a `--thread ID` (and `extra` options that go with it): given, `handler`
    serves the command (with the values of `allowed` of the command's own parameters, the
    others refused); not given, the command runs as it is, its required parameters checked
    as click would (they are optional on the command line, since --thread stands for them)."""
    options = [click.Option(["--thread"], metavar="ID", help=THREAD_HELP), *extra]
    names = [o.name for o in options if o.name]
    required = [p for p in command.params if p.required]
    for param in required:
        param.required = False
    command.params.extend(options)
    if examples:
        command.epilog = (command.epilog or "\b") + "".join(f"\nexample: {e}" for e in examples)
    original = command.callback
    assert original is not None

    def callback(**values: Any) -> Any:
        mine = {name: values.pop(name, None) for name in names}
        thread = mine["thread"]
        if thread is None:
            given = [f"--{n}" for n, v in mine.items() if v not in (None, False)]
            if given:
                raise UsageError(f"{', '.join(given)} goes with --thread ID.")
            for param in required:
                if values.get(param.name or "") in (None, ()):
                    _missing(param)
            return original(**values)
        refused = [n for n, v in values.items() if n not in allowed and v not in (None, False, ())]
        if refused:
            shown_names = ", ".join(n.upper() if n == "run" else f"--{n}" for n in refused)
            raise UsageError(f"{shown_names} does not go with --thread: give one or the other.")
        return handler(**mine, **{n: values.get(n) for n in allowed})

    command.callback = callback


def _missing(param: click.Parameter) -> None:
    """Refuse the command line as click refuses a required parameter left out."""
    ctx = click.get_current_context()
    param.required = True  # as click says it: `RUN`, not `[RUN]`
    try:
        said = click.MissingParameter(ctx=ctx, param=param).format_message()
    finally:
        param.required = False
    raise click.UsageError(said, ctx)


def add_thread_options(show: click.Command, replay: click.Command, branch: click.Command) -> None:
    """`--thread` on `agentsm show` (the conversation), `replay` (every turn) and `branch`
    (another message at a turn, in a new thread)."""
    _with_thread(
        show,
        _show,
        allowed=("as_json",),
        examples=("agentsm show --thread 7f3c2a9e01bd",),
    )
    _with_thread(
        replay,
        _replay,
        allowed=("builder", "execute_tools"),
        examples=("agentsm replay --thread 7f3c2a9e01bd",),
    )
    _with_thread(
        branch,
        _branch,
        [
            click.Option(
                ["--turn"], type=click.IntRange(min=1), metavar="N", help="with --thread: the turn"
            ),
            click.Option(["--message"], metavar="TEXT", help="with --thread: the other message"),
        ],
        allowed=("builder", "as_json"),
        examples=(
            "agentsm branch --thread 7f3c2a9e01bd --turn 3 --message 'In Celsius, please' "
            "--builder myagent:make_agent",
        ),
    )


COMMANDS = [chat, threads_command]
