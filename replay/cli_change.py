"""`agentsm demo`, `replay`, `branch`, `resume` and the human decisions: the commands that run
an agent or add to the log."""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Literal

import click

from agentsm import AgentFailed, HumanInputRequired, LlmResponse, ToolCall, ToolOutcome
from agentsm import facts as f
from eventstore import EventStore

from .branching import branch_run
from .branchnotes import UnusedChange
from .cli_common import (
    DEFAULT_DB,
    builder_option,
    common,
    config_arg,
    db_path,
    example,
    get_builder,
    json_arg,
    open_log,
    out,
    plural,
)
from .demo import run_demo
from .errors import BuilderRequired, UsageError
from .recording import Recording
from .render import printable
from .replaying import replay_run
from .report import ReplayReport
from .resuming import decide, pending_requests, resume_run
from .source import agent_of, resolve_run
from .timetravel import memory_at

__all__ = ["COMMANDS"]

FORCE_HELP = "take the run over even though the process that drives it seems alive"


@click.command(epilog=example("agentsm demo", "agentsm demo --db /tmp/demo.db"))
@common
def demo() -> None:
    """Run the demo agent into the log the other commands read: record, print, rebuild,
    replay, branch; then list the commands to explore it."""
    sys.exit(run_demo(db_path(), out, default=os.environ.get("AGENTSM_DB") or DEFAULT_DB))


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def _replay_line(report: ReplayReport, details: bool) -> str:
    """How one replay went, on one line (and, with `details`, the diffs below it)."""
    parts = []
    change, divergence = report.definition_change, report.divergence
    if change is not None:
        parts.append(out("definition changed", "yellow") + f" ({', '.join(change.fields)})")
        if divergence is None:
            parts.append(f"{out('behaviour identical', 'green')}  ({report.compared} facts)")
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


def _family_lines(report: ReplayReport, depth: int = 0) -> str:
    """The replay of a run and, below it, those of its sub-agent runs, indented."""
    line = _replay_line(report, details=True)
    if depth:
        line = "\n".join("  " * depth + part for part in f"└ sub-agent {line}".splitlines())
    return "\n".join([line, *(_family_lines(c, depth + 1) for c in report.children)])


@click.command(
    epilog=example(
        "agentsm replay 3f2a",
        "agentsm replay --all --builder myagent:make_agent",
        "agentsm replay 3f2a --children --builder myagent:make_agent",
    )
)
@click.argument("run", required=False)
@click.option("--all", "every", is_flag=True, help="replay every run of the log")
@click.option(
    "--execute-tools", is_flag=True, help="run the tools again instead of serving recorded results"
)
@click.option(
    "--children", is_flag=True, help="replay the run's sub-agent runs too, each on its own"
)
@builder_option
@common
def replay(
    run: str | None, every: bool, execute_tools: bool, children: bool, builder: str | None
) -> None:
    """Replay runs against their recording: identical, or a changed definition and the first
    divergence in behaviour. Runs that only your agent can replay (custom states, handlers,
    redaction hooks) are named apart. A sub-agent's answer is served from the parent's log;
    --children replays the sub-agent runs too and reports each. Exit 0 identical, 1 changed,
    2 a run failed or needs --builder."""
    store = open_log()
    make = get_builder(builder)
    if not every and not run:
        raise UsageError("replay needs a RUN id, or --all to replay every run of the log.")
    if not every:
        report = replay_run(store, run or "", make, execute_tools=execute_tools, children=children)
        click.echo(_family_lines(report))
        sys.exit(0 if report.identical else 1)
    counts = dict.fromkeys(("identical", "changed", "diverged", "needs", "failed"), 0)
    runs = [r.run_id for r in store.runs()]
    needs: list[str] = []
    for run_id in runs:  # every run, whatever happens to one of them
        try:
            report = replay_run(store, run_id, make, execute_tools=execute_tools)
        except BuilderRequired as e:
            counts["needs"] += 1
            needs.append(
                f"{run_id}  {out('needs --builder', 'yellow')}: {printable(', '.join(e.needs))}"
            )
            continue
        except Exception as e:
            counts["failed"] += 1
            click.echo(f"{run_id}  {out('FAILED', 'red', 'bold')}: {printable(one_line(e))}")
            continue
        click.echo(_replay_line(report, details=False))
        outcome = "identical" if report.identical else "changed" if report.same_behaviour else ""
        counts[outcome or "diverged"] += 1
    if needs:
        click.echo("\nNot replayed: only your agent has what these runs used (pass --builder):")
        click.echo("\n".join(needs))
    others = [
        f"{counts[key]} {label}"
        for key, label in (
            ("changed", "with a changed definition and identical behaviour"),
            ("needs", "need --builder"),
            ("failed", "failed"),
        )
        if counts[key]
    ]
    summary = [f"{counts['identical']} identical", f"{counts['diverged']} diverged", *others]
    click.echo(f"\n{plural(len(runs), 'run')} replayed: {', '.join(summary)}")
    if counts["needs"] or counts["failed"]:
        sys.exit(2)
    sys.exit(0 if counts["identical"] == len(runs) else 1)


def branch_warnings(
    store: EventStore, new_id: str, *, answered: bool, live_llm: bool, tool_result: bool = False
) -> list[str]:
    """What the user should know of a branch from its own log: an answer refused (and why),
    the parent's recorded responses served after a changed answer or tool result."""
    entries = Recording.load(store, new_id).entries
    marks = [i for i, e in enumerate(entries) if isinstance(e.fact, f.RunBranched)]
    after = entries[marks[-1] + 1 :] if marks else []
    notes = []
    for e in after:
        if isinstance(e.fact, f.AnswerRejected):
            notes.append(
                f"the answer at seq {e.seq} was refused ({e.fact.reason}): "
                f"{printable(e.fact.content[:60])!r}"
            )
    responses = [e for e in after if isinstance(e.fact, f.LlmResponded | f.LlmFailed)]
    served = len(responses) - (1 if answered else 0)
    if (answered or tool_result) and not live_llm and served > 0:
        given = "answer" if answered else "tool result"
        notes.append(
            f"after the {given} given, {plural(served, 'LLM response')} came from the parent's "
            "recording; pass --live with --builder to ask the LLM instead"
        )
    return notes


@click.command(
    epilog=example(
        "agentsm branch 3f2a --at 17 --answer 'Paris.'",
        "agentsm branch 3f2a --at 12 --tool-error 'declined by the bank'",
        """agentsm branch 3f2a --at 17 --config '{"max_steps": 3}'""",
        "agentsm branch 3f2a --at 17 --live --builder myagent:make_agent --live-tools",
    )
)
@click.argument("run")
@click.option(
    "--at",
    "--seq",
    "at",
    type=int,
    required=True,
    metavar="SEQ",
    help="sequence number to branch at",
)
@click.option("--answer", metavar="TEXT", help="the LLM's next response: this final answer")
@click.option("--tool-result", metavar="TEXT", help="the next tool call's result")
@click.option(
    "--tool-error",
    metavar="TEXT",
    help="the next tool call fails with this error (recorded as 'ERROR: ToolError: TEXT')",
)
@click.option(
    "--config", metavar="JSON", help="AgentConfig fields to change (the others kept as recorded)"
)
@click.option("--live", is_flag=True, help="the builder's own LLM answers from the branch point on")
@click.option(
    "--live-tools",
    is_flag=True,
    help="run your real tools (with --builder) for calls the parent has no result for; "
    "without it they get a NotRecorded error",
)
@builder_option
@common
def branch(
    run: str,
    at: int,
    answer: str | None,
    tool_result: str | None,
    tool_error: str | None,
    config: str | None,
    live: bool,
    live_tools: bool,
    builder: str | None,
) -> None:
    """Start a new run from a point of a run, with a change, and report what it did: its id,
    final state and answer, and warnings. Exit 1 when the branch ends in Error."""
    response = LlmResponse.final_answer(answer) if answer is not None else None
    if tool_result is not None and tool_error is not None:
        raise UsageError("give --tool-result or --tool-error, not both: the next call has one.")
    outcome_given = (
        ToolOutcome.failed("ToolError", tool_error) if tool_error is not None else tool_result
    )
    make = get_builder(builder, required=live or live_tools)
    store = open_log(write=True)
    run_id = resolve_run(store, run)
    changed = None
    if config:
        recorded, _ = memory_at(store, run_id, at)
        changed = config_arg(config, recorded.config)
    llm = None
    if live and make is not None:
        definition = Recording.load(store, run_id, upto=1).definition
        agent = agent_of(store, definition, make)(definition.task)  # a sub-agent run's own
        llm = agent.llm_caller or agent.build().llm  # without listing MCP tools, if it has one
    ran_live: list[ToolCall] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnusedChange)
        new_id = branch_run(
            store,
            run_id,
            at,
            llm_response=response,
            tool_result=outcome_given,
            config=changed,
            llm=llm,
            builder=make,
            live_tools=live_tools,
            on_live_tool=ran_live.append,
        )
    record = store.run(new_id)
    click.echo(printable(new_id))
    moves = [e.fact for e in Recording.load(store, new_id).entries]
    state = next((m.to_state for m in reversed(moves) if isinstance(m, f.Transitioned)), "Idle")
    outcome = record.summary.answer or record.summary.error or ""
    click.echo(
        f"  {record.shown_status} (state {printable(state)})"
        + (f": {printable(outcome)}" if outcome else "")
    )
    notes = branch_warnings(
        store,
        new_id,
        answered=response is not None,
        live_llm=llm is not None,
        tool_result=outcome_given is not None,
    )
    if ran_live:
        calls = ", ".join(printable(c.name) for c in ran_live)
        notes.append(f"{plural(len(ran_live), 'tool call')} ran live (your real tools): {calls}")
    for warning in caught:
        if isinstance(warning.message, UnusedChange):
            notes.append(printable(str(warning.message)))
        else:
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    for note in notes:
        click.echo(f"agentsm: warning: {note}", err=True)
    sys.exit(1 if record.status in ("failed", "aborted") else 0)


@click.command(epilog=example("agentsm resume 3f2a --builder myagent:make_agent"))
@click.argument("run")
@click.option("--force", is_flag=True, help=FORCE_HELP)
@builder_option
@common
def resume(run: str, force: bool, builder: str | None) -> None:
    """Continue a run that stopped without finishing (exit 3 when it waits for a human)."""
    make = get_builder(builder, required=True)
    assert make is not None
    try:
        answer = resume_run(open_log(write=True), run, make, force=force)
    except HumanInputRequired as e:
        for n, request in enumerate(e.requests, start=1):
            call = f"{request.call.name}({json.dumps(request.call.args, ensure_ascii=False)})"
            click.echo(printable(f"waiting #{n}: {call} [{request.call.id}] — {request.reason}"))
        click.echo(f"Answer with: agentsm approve {printable(e.run_id)}   (or reject, modify)")
        sys.exit(3)
    except AgentFailed as e:
        click.echo(out(f"failed: {e.error}", "red"))
        sys.exit(1)
    click.echo(printable(answer, lines=True))


def _decision(verdict: Literal["approved", "rejected", "modified"], name: str) -> click.Command:
    texts = {
        "approved": "Approve the call(s) a run waits on.",
        "rejected": "Reject the call(s) a run waits on.",
        "modified": "Approve a waiting call with other arguments.",
    }
    extra = " --args '{\"amount\": 5}'" if verdict == "modified" else ""

    @click.command(name=name, help=texts[verdict], epilog=example(f"agentsm {name} 3f2a{extra}"))
    @click.argument("run")
    @click.option(
        "--call",
        metavar="ID",
        help="the waiting call: its id, a unique prefix, or #N (default: every waiting call)",
    )
    @click.option("--note", default="", help="a note recorded with the decision")
    @click.option("--force", is_flag=True, help=FORCE_HELP)
    @common
    def command(
        run: str, call: str | None, note: str, force: bool, args: str | None = None
    ) -> None:
        new_args = _json_arg_object(args) if args else None
        store = open_log(write=True)
        decisions = decide(store, run, verdict, args=new_args, call_id=call, note=note, force=force)
        for d in decisions:
            click.echo(printable(f"{d.call_id}: {verdict}"))
        left = pending_requests(store, run)
        click.echo(
            printable(
                "still waiting for: "
                + ", ".join(f"#{n} {r.call.id}" for n, r in enumerate(left, start=1))
            )
            if left
            else f"recorded (status ready): a running `agentsm worker` takes it up, or continue "
            f"with: agentsm resume {run}"
            + ("" if os.environ.get("AGENTSM_BUILDER") else " --builder ...")
        )

    if verdict == "modified":
        command = click.option(
            "--args", required=True, metavar="JSON", help="the replacement arguments as JSON"
        )(command)
    return command


def _json_arg_object(text: str) -> dict[str, object]:
    value = json_arg("--args", text, """--args '{"amount": 5}'""")
    if not isinstance(value, dict):
        raise UsageError(
            """--args must be a JSON object of arguments, e.g. --args '{"amount": 5}'."""
        )
    return value


COMMANDS = [
    demo,
    replay,
    branch,
    resume,
    _decision("approved", "approve"),
    _decision("rejected", "reject"),
    _decision("modified", "modify"),
]
