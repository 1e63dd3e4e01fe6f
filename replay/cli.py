"""The `agentsm` command line: record (demo), list, show, time-travel, replay, branch, diff,
resume, decide, export and import runs of an agentsm log."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, NoReturn

from pydantic import ValidationError

from agentsm import (
    AgentConfig,
    AgentError,
    AgentFailed,
    HumanInputRequired,
    LlmResponse,
    UnreadableFact,
)
from agentsm.memory import fold_with_state
from eventstore import EventStore, SQLiteEventStore, StoreError

from .branching import branch_run
from .branchnotes import UnusedChange
from .demo import run_demo
from .diffing import diff_runs
from .errors import BuilderRequired, UsageError
from .recording import Recording
from .render import Style, printable, table
from .replaying import replay_run
from .report import ReplayReport
from .resuming import decide, pending_requests, resume_run
from .source import Builder, load_builder, open_store, resolve_run
from .timetravel import memory_at
from .transfer import export_run, import_runs

__all__ = ["main"]

out = Style(sys.stdout)
FORCE_HELP = "take the run over even though the process that drives it seems alive"


def _store(args: argparse.Namespace, *, write: bool = False) -> EventStore:
    """The log of `--db`; commands that only inspect it open it read-only."""
    return open_store(args.db, read_only=not write)


def _builder(args: argparse.Namespace, required: bool = False) -> Builder | None:
    spec = getattr(args, "builder", None) or os.environ.get("AGENTSM_BUILDER")
    if spec:
        return load_builder(spec)
    if required:
        raise UsageError(
            "This command needs your agent: pass --builder module:factory (or set "
            "AGENTSM_BUILDER), where factory(task) returns an AgentBuilder."
        )
    return None


def _json_arg(option: str, text: str, example: str) -> Any:
    """A JSON command-line value, or an error naming the option and showing the form."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise UsageError(f"{option} is not valid JSON ({e}); give it as in {example}.") from e


def _config_arg(text: str, recorded: AgentConfig) -> AgentConfig:
    """The recorded config with the fields given in `--config` changed (the others kept)."""
    example = """--config '{"max_steps": 3}'"""
    value = _json_arg("--config", text, example)
    if not isinstance(value, dict):
        raise UsageError(f"--config must be a JSON object of AgentConfig fields, e.g. {example}.")
    try:
        return AgentConfig.model_validate({**recorded.model_dump(), **value})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the value"
        fields = ", ".join(AgentConfig.model_fields)
        raise UsageError(
            f"--config is not a valid AgentConfig: {where}: {first['msg']}; the fields are "
            f"{fields}, e.g. {example}."
        ) from e


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


# -- commands -----------------------------------------------------------------------------------


def cmd_runs(args: argparse.Namespace) -> int:
    store = _store(args)
    records = store.runs()
    rows: list[list[str]] = []
    depth: dict[str, int] = {}
    ordered = records
    if args.tree:
        children: dict[str | None, list[str]] = {}
        by_id = {r.run_id: r for r in records}
        for r in records:
            parent = r.parent_id if r.parent_id in by_id else None
            children.setdefault(parent, []).append(r.run_id)
        ordered = []

        def walk(parent: str | None, level: int) -> None:
            for run_id in children.get(parent, []):
                depth[run_id] = level
                ordered.append(by_id[run_id])
                walk(run_id, level + 1)

        walk(None, 0)
    unreadable: list[UnreadableFact] = []
    for r in ordered:
        try:
            if r.last_seq == 0:  # a run without facts, as older releases could leave after a crash
                steps, tokens = "0", "0"
            else:
                memory, _ = fold_with_state(e.fact for e in Recording.load(store, r.run_id).entries)
                steps, tokens = str(memory.step), str(memory.total_usage.total_tokens)
        except UnreadableFact as e:  # that run only: the others are listed
            unreadable.append(e)
            steps, tokens = "?", "?"
        indent = "  " * depth.get(r.run_id, 0) + ("└ " if depth.get(r.run_id) else "")
        parent = f"{r.parent_id}@{r.branch_seq}" if r.parent_id else ""
        rows.append(
            [
                indent + r.run_id,
                r.task[:40] + ("…" if len(r.task) > 40 else ""),
                out.status(r.shown_status),
                steps,
                tokens,
                _when(r.created_at),
                f"{r.updated_at - r.created_at:.2f}s",
                parent,
            ]
        )
    if not rows:
        print(f"No runs in {printable(args.db)}.")
        return 0
    headers = ["id", "task", "status", "steps", "tokens", "started", "duration", "parent"]
    print(table(headers, rows, out))
    for problem in unreadable:
        print(f"agentsm: {problem}", file=sys.stderr)
    return 1 if unreadable else 0


def cmd_show(args: argparse.Namespace) -> int:
    recording = Recording.load(_store(args), args.run)
    if args.json:
        for e in recording.entries:
            print(json.dumps(e.to_dict()))
        return 0
    r = recording.run
    status = out.status(r.shown_status)
    print(out(f"run {r.run_id}", "bold") + f"  {status}  task: {printable(r.task)}")
    if r.parent_id:
        print(f"branched from {printable(r.parent_id)} at seq {r.branch_seq}")
    rows = [
        [str(e.seq), str(e.step), e.state, out(e.event, "cyan"), e.data] for e in recording.entries
    ]
    print(table(["seq", "step", "state", "fact", "data"], rows, out))
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    store = _store(args)
    run_id = resolve_run(store, args.run)
    seq = args.at if args.at is not None else store.run(run_id).last_seq
    memory, state = memory_at(store, run_id, seq)
    if args.json:
        print(
            json.dumps(
                {"seq": seq, "state": str(state), "memory": memory.model_dump(mode="json")},
                indent=2,
            )
        )
        return 0
    print(out(f"run {run_id} at seq {seq}: state {state}", "bold"))
    fields = [
        ("task", memory.task),
        ("step", memory.step),
        ("retry_count", memory.retry_count),
        ("tokens", memory.total_usage.total_tokens),
        ("final_answer", memory.final_answer),
        ("error", memory.error),
        (
            "planned_calls",
            ", ".join(
                f"{c.name}({json.dumps(c.args, ensure_ascii=False)})" for c in memory.planned_calls
            ),
        ),
        ("pending_approval", ", ".join(memory.pending_approval)),
    ]
    for name, value in fields:
        if value not in (None, ""):
            print(f"  {name:<16} {printable(value)}")
    print(f"  history ({len(memory.history)} entries)")
    for entry in memory.history:
        mark = out("ok ", "green") if entry.success else out("err", "red")
        call = printable(f"{entry.tool.name}({json.dumps(entry.tool.args, ensure_ascii=False)})")
        print(f"    [{entry.step}] {mark} {call} -> {printable(entry.observation[:80])}")
    return 0


def _replay_line(report: ReplayReport, details: bool) -> str:
    """How one replay went, on one line (and, with `details`, the diffs below it)."""
    parts = []
    change, divergence = report.definition_change, report.divergence
    if change is not None:
        parts.append(out("definition changed", "yellow") + f" ({', '.join(change.fields)})")
        if divergence is None:
            parts.append(f"then {out('same behaviour', 'green')}  ({report.compared} facts)")
    if divergence is not None:
        parts.append(f"{out('DIVERGED', 'red', 'bold')}  at {printable(divergence.headline())}")
    if not parts:
        parts.append(f"{out('identical', 'green')}  ({report.compared} facts)")
    text = f"{report.run_id}  " + "; ".join(parts)
    if details:
        for diverged in (change, divergence):
            if diverged is not None:
                text += "\n" + printable(diverged.diff, lines=True)
    return text


def cmd_replay(args: argparse.Namespace) -> int:
    store = _store(args)
    builder = _builder(args)
    if not args.all and not args.run:
        raise UsageError("replay needs a RUN id, or --all to replay every run of the database.")
    if not args.all:
        report = replay_run(store, args.run, builder, execute_tools=args.execute_tools)
        print(_replay_line(report, details=True))
        return 0 if report.identical else 1
    counts = dict.fromkeys(("identical", "changed", "diverged", "needs", "failed"), 0)
    runs = [r.run_id for r in store.runs()]
    for run_id in runs:  # every run, whatever happens to one of them
        try:
            report = replay_run(store, run_id, builder, execute_tools=args.execute_tools)
        except BuilderRequired as e:
            counts["needs"] += 1
            print(f"{run_id}  {out('needs --builder', 'yellow')}: {printable(', '.join(e.needs))}")
            continue
        except Exception as e:
            counts["failed"] += 1
            print(f"{run_id}  {out('FAILED', 'red', 'bold')}: {printable(_one_line(e))}")
            continue
        print(_replay_line(report, details=False))
        outcome = "identical" if report.identical else "changed" if report.same_behaviour else ""
        counts[outcome or "diverged"] += 1
    others = [
        f"{counts[key]} {label}"
        for key, label in (
            ("changed", "same behaviour under a changed definition"),
            ("needs", "need --builder"),
            ("failed", "failed"),
        )
        if counts[key]
    ]
    summary = [f"{counts['identical']} identical", f"{counts['diverged']} diverged", *others]
    print(f"\n{len(runs)} runs replayed: {', '.join(summary)}")
    if counts["needs"] or counts["failed"]:
        return 2
    return 0 if counts["identical"] == len(runs) else 1


def cmd_branch(args: argparse.Namespace) -> int:
    answer = LlmResponse.final_answer(args.answer) if args.answer is not None else None
    builder = _builder(args, required=args.live)
    store = _store(args, write=True)
    config = None
    if args.config:
        recorded, _ = memory_at(store, resolve_run(store, args.run), args.at)
        config = _config_arg(args.config, recorded.config)
    live = None
    if args.live and builder is not None:
        live = builder(Recording.load(store, args.run).definition.task).build().llm
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnusedChange)
        new_id = branch_run(
            store,
            args.run,
            args.at,
            llm_response=answer,
            tool_result=args.tool_result,
            config=config,
            llm=live,
            builder=builder,
        )
    print(printable(new_id))
    for warning in caught:
        if isinstance(warning.message, UnusedChange):
            print(f"agentsm: note: {printable(warning.message)}", file=sys.stderr)
        else:
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    print(printable(diff_runs(_store(args), args.run_a, args.run_b), lines=True))
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    builder = _builder(args, required=True)
    assert builder is not None
    try:
        answer = resume_run(_store(args, write=True), args.run, builder, force=args.force)
    except HumanInputRequired as e:
        for n, request in enumerate(e.requests, start=1):
            call = f"{request.call.name}({json.dumps(request.call.args, ensure_ascii=False)})"
            print(printable(f"waiting #{n}: {call} [{request.call.id}] — {request.reason}"))
        print(f"Answer with: agentsm approve|reject|modify {printable(e.run_id)}")
        return 3
    except AgentFailed as e:
        print(out(f"failed: {e.error}", "red"))
        return 1
    print(printable(answer, lines=True))
    return 0


def _decide(
    verdict: Literal["approved", "rejected", "modified"],
) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:
        new_args = (
            _json_arg("--args", args.args, """--args '{"amount": 5}'""")
            if getattr(args, "args", None)
            else None
        )
        if new_args is not None and not isinstance(new_args, dict):
            raise UsageError(
                """--args must be a JSON object of arguments, e.g. --args '{"amount": 5}'."""
            )
        store = _store(args, write=True)
        decisions = decide(
            store,
            args.run,
            verdict,
            args=new_args,
            call_id=args.call,
            note=args.note,
            force=args.force,
        )
        for d in decisions:
            print(printable(f"{d.call_id}: {verdict}"))
        left = pending_requests(store, args.run)
        print(
            printable(
                "still waiting for: "
                + ", ".join(f"#{n} {r.call.id}" for n, r in enumerate(left, start=1))
            )
            if left
            else f"recorded; continue with: agentsm resume {args.run} --builder ..."
        )
        return 0

    return command


def cmd_export(args: argparse.Namespace) -> int:
    for line in export_run(_store(args), args.run):
        print(line)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    lines = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    name = "standard input" if args.file == "-" else args.file
    created = args.db != ":memory:" and "://" not in args.db and not Path(args.db).exists()
    store = open_store(args.db, create=True)
    try:
        imported = import_runs(store, lines.splitlines(), name=name)
    except BaseException:
        store.close()
        if created:  # a refused import leaves no database it made behind
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(args.db + suffix).unlink(missing_ok=True)
        raise
    for run_id in imported:
        print(f"imported {printable(run_id)}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    store = _store(args)
    if not args.all and not args.run:
        raise AgentError("verify needs a RUN id, or --all to check every run of the database.")
    run_ids = [r.run_id for r in store.runs()] if args.all else [resolve_run(store, args.run)]
    broken = 0
    for run_id in run_ids:
        report = store.verify(run_id)
        if report.ok:
            print(printable(str(report)))
        else:
            broken += 1
            print(out(printable(str(report)), "red", "bold"))
    if args.all:
        print(f"\n{len(run_ids)} runs verified: {len(run_ids) - broken} intact, {broken} broken")
    return 1 if broken else 0


def cmd_backup(args: argparse.Namespace) -> int:
    with SQLiteEventStore(args.db, read_only=True) as store:
        store.backup(args.dest)
    print(f"backed up {printable(args.db)} to {printable(args.dest)}")
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    from agentsm import build_transition_table
    from agentsm.pictures import path_of, save, state_diagram, to_mermaid

    builder = _builder(args)
    path = None
    title = "transition table"
    task = "graph"
    if args.run:
        recording = Recording.load(_store(args), args.run)
        path = path_of(e.fact for e in recording.entries)
        title = f"run {recording.run_id}: the path it took"
        task = recording.definition.task
    table = builder(task).build().table if builder is not None else build_transition_table()
    if not args.out or args.out.endswith((".mmd", ".md")):
        text = to_mermaid(table, path)
        if args.out:
            Path(args.out).write_text(text + "\n")
            print(f"wrote {args.out}")
        else:
            print(printable(text, lines=True))
        return 0
    print(f"wrote {save(state_diagram(table, path, title), args.out)}")
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    from agentsm.pictures import save, timeline

    recording = Recording.load(_store(args), args.run)
    title = f"run {recording.run_id}: {recording.run.task[:60]}"
    print(f"wrote {save(timeline(list(recording.entries), title), args.out)}")
    return 0


def cmd_family(args: argparse.Namespace) -> int:
    from agentsm.pictures import family_tree, save

    store = _store(args)
    run_id = resolve_run(store, args.run)
    labels = {}
    for r in store.runs():
        try:
            memory, _ = fold_with_state(e.fact for e in Recording.load(store, r.run_id).entries)
        except UnreadableFact:
            labels[r.run_id] = "(unreadable)"
            continue
        labels[r.run_id] = memory.final_answer or memory.error or ""
    print(f"wrote {save(family_tree(store, run_id, labels), args.out)}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(args.db, out)


# -- parser ---------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line, pointing at the command's --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {printable(message)}; see {self.prog} --help.\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agentsm",
        description="Record, inspect, replay, branch and resume agent runs.",
        epilog="example: agentsm --db prod.db runs --tree",
    )
    parser.add_argument("--db", help=_DB_HELP)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: object, help: str, example: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, epilog=f"example: {example}")
        p.set_defaults(func=func)
        p.add_argument("--db", default=argparse.SUPPRESS, help=_DB_HELP)
        p.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show the traceback of an error",
        )
        return p

    def builder_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--builder",
            help="your agent as module:factory (factory(task) -> "
            "AgentBuilder); default $AGENTSM_BUILDER",
        )

    add(
        "demo",
        cmd_demo,
        "run the demo agent: record, print, rebuild, replay, branch",
        "agentsm demo --db /tmp/demo.db",
    )
    runs = add("runs", cmd_runs, "list the runs of the database", "agentsm runs --tree")
    runs.add_argument("--tree", action="store_true", help="show branch families as a tree")
    show = add("show", cmd_show, "print a run's trace", "agentsm show 3f2a --json")
    show.add_argument("run", help="run id (or a unique prefix)")
    show.add_argument("--json", action="store_true", help="JSON lines, one per fact")
    mem = add(
        "memory",
        cmd_memory,
        "memory and state of a run at a sequence number",
        "agentsm memory 3f2a --at 17",
    )
    mem.add_argument("run")
    mem.add_argument("--at", type=int, help="sequence number (default: the last)")
    mem.add_argument("--json", action="store_true")
    rep = add(
        "replay",
        cmd_replay,
        "replay a run against its recording: identical, or a changed definition and the first "
        "divergence in behaviour (exit 0 identical, 1 changed, 2 a run failed or needs --builder)",
        "agentsm replay --all --builder myagent:make_agent",
    )
    rep.add_argument("run", nargs="?")
    rep.add_argument("--all", action="store_true", help="replay every run of the database")
    rep.add_argument(
        "--execute-tools",
        action="store_true",
        help="run the tools again instead of serving recorded results",
    )
    builder_option(rep)
    br = add(
        "branch",
        cmd_branch,
        "start a new run from a point of a run, with a change",
        "agentsm branch 3f2a --at 17 --answer 'Paris.'",
    )
    br.add_argument("run")
    br.add_argument("--at", type=int, required=True, help="sequence number to branch at")
    br.add_argument("--answer", help="the LLM's next response: this final answer")
    br.add_argument("--tool-result", help="the next tool call's result")
    br.add_argument(
        "--config", help="AgentConfig fields to change, as JSON (the others are kept as recorded)"
    )
    br.add_argument(
        "--live",
        action="store_true",
        help="let the builder's own LLM answer from the branch point on",
    )
    builder_option(br)
    diff = add("diff", cmd_diff, "where two runs part, and how each ends", "agentsm diff 3f2a 9c1e")
    diff.add_argument("run_a")
    diff.add_argument("run_b")
    res = add(
        "resume",
        cmd_resume,
        "continue a run that stopped without finishing",
        "agentsm resume 3f2a --builder myagent:make_agent",
    )
    res.add_argument("run")
    res.add_argument("--force", action="store_true", help=FORCE_HELP)
    builder_option(res)
    decisions: tuple[tuple[Literal["approved", "rejected", "modified"], str, str], ...] = (
        ("approved", "approve", "approve the call(s) a run waits on"),
        ("rejected", "reject", "reject the call(s) a run waits on"),
        ("modified", "modify", "approve a waiting call with other arguments"),
    )
    for verdict, name, text in decisions:
        p = add(
            name,
            _decide(verdict),
            text,
            f"agentsm {name} 3f2a" + (" --args '{\"amount\": 5}'" if name == "modify" else ""),
        )
        p.add_argument("run")
        p.add_argument(
            "--call",
            help="the waiting call: its id, a unique prefix, or #N (default: every waiting call)",
        )
        p.add_argument("--note", default="", help="a note recorded with the decision")
        p.add_argument("--force", action="store_true", help=FORCE_HELP)
        if name == "modify":
            p.add_argument("--args", required=True, help="the replacement arguments as JSON")
    graph = add(
        "graph",
        cmd_graph,
        "the transition table as a state diagram, with a run's path (Mermaid text, or .svg/.png)",
        "agentsm graph 3f2a --out run.svg",
    )
    graph.add_argument("run", nargs="?", help="highlight the path this run took")
    graph.add_argument("--out", help="file to write: .svg or .png (image), .mmd (Mermaid)")
    builder_option(graph)
    tl = add(
        "timeline",
        cmd_timeline,
        "a run's timeline: states, tool calls, tokens, durations",
        "agentsm timeline 3f2a --out run.png",
    )
    tl.add_argument("run")
    tl.add_argument("--out", required=True, help="file to write: .svg or .png")
    fam = add(
        "family",
        cmd_family,
        "a run's branch family as a tree",
        "agentsm family 3f2a --out family.png",
    )
    fam.add_argument("run")
    fam.add_argument("--out", required=True, help="file to write: .svg or .png")
    exp = add("export", cmd_export, "write a run as JSON lines", "agentsm export 3f2a > run.jsonl")
    exp.add_argument("run")
    imp = add(
        "import",
        cmd_import,
        "add the runs of a JSON lines export to the database",
        "agentsm --db other.db import run.jsonl",
    )
    imp.add_argument("file", help="the export file, or - for standard input")
    ver = add(
        "verify",
        cmd_verify,
        "check the hash chain of a run's facts: intact, or the first broken link (exit code 0/1)",
        "agentsm verify --all",
    )
    ver.add_argument("run", nargs="?", help="run id (or a unique prefix)")
    ver.add_argument("--all", action="store_true", help="check every run of the database")
    bak = add(
        "backup",
        cmd_backup,
        "copy the database, live or not, into a new file (one consistent snapshot)",
        "agentsm --db runs.db backup runs-copy.db",
    )
    bak.add_argument("dest", help="the new file to write")
    return parser


_DB_HELP = "the agentsm log (default: $AGENTSM_DB, else ./agentsm.db; ./agentsm-demo.db for demo)"


def _default_db(args: argparse.Namespace) -> str:
    return "agentsm-demo.db" if args.func is cmd_demo else "agentsm.db"


def _one_line(error: BaseException) -> str:
    """An error as one line: our own errors say what was wrong and what to do; anything else
    is named as unexpected, with the way to see more."""
    text = " ".join(str(error).split())
    if isinstance(error, StoreError | AgentError | ValueError):
        return text or type(error).__name__
    if isinstance(error, OSError) and error.strerror:
        name = f" {error.filename!r}" if error.filename else ""
        return f"cannot use{name}: {error.strerror}; check the path and its permissions."
    return (
        f"unexpected {type(error).__name__}: {text or 'no message'}; run the command again with "
        "--debug for the traceback."
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agentsm` command: 0 done, 1 a replay diverged or a run failed,
    2 an error (one line on stderr; the traceback with --debug), 3 a run waits for a human."""
    args = _parser().parse_args(argv)
    if args.db is None:  # --db (before or after the command), then the environment
        demo = args.func is cmd_demo and os.environ.get("AGENTSM_DEMO_DB")
        args.db = demo or os.environ.get("AGENTSM_DB") or _default_db(args)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("agentsm: interrupted.", file=sys.stderr)
        return 130
    except Exception as e:
        if getattr(args, "debug", False):
            print(printable(traceback.format_exc(), lines=True), file=sys.stderr, end="")
        print(f"agentsm: {printable(_one_line(e))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
