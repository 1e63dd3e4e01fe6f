"""`agentsm demo`, `replay`, `branch`, `resume` and the human decisions: the commands that run
an agent or add to the log."""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Literal

import click

from agentsm import AgentFailed, HumanInputRequired, LlmResponse, ToolOutcome
from agentsm import facts as f

from ..branching import agent_llm, branch_run
from ..branchnotes import UnusedChange
from ..demo import run_demo
from ..errors import BuilderRequired, UsageError
from ..recording import Recording
from ..render import printable
from ..replaying import replay_run
from ..report import ReplayReport
from ..resuming import decide, pending_requests, resume_run
from ..source import resolve_run
from ..timetravel import memory_at
from .common import (
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

__all__ = ["COMMANDS", "approve", "branch", "demo", "modify", "reject", "replay", "resume"]

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


@click.command(
    epilog=example(
        "agentsm branch 3f2a --at 17 --answer 'Paris.'",
        "agentsm branch 3f2a --at 12 --tool-error 'declined by the bank'",
        """agentsm branch 3f2a --at 17 --config '{"max_steps": 3}'""",
        "agentsm branch 3f2a --at 17 --tool-result '30 C' --live --builder myagent:make_agent",
        "agentsm branch 3f2a --at 17 --live --live-tools --builder myagent:make_agent",
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
@click.option(
    "--live",
    is_flag=True,
    help="your LLM (--builder) answers every LLM call from the branch point on; without it a "
    "request that differs from the parent's stops the branch",
)
@click.option(
    "--live-tools",
    is_flag=True,
    help="run your real tools (--builder) for calls the parent did not make at that place; "
    "without it such a call stops the branch",
)
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
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
    as_json: bool,
    builder: str | None,
) -> None:
    """Start a new run from a point of a run, with a change, and report what it did: its id,
    final status, state and answer, where it started (and why, when not at SEQ), then where
    each LLM response and tool result after the point came from: given, reused from the
    parent (the same request at the same place), live, or needed (the branch stopped there).
    Exit 1 when the branch ends in Error, 2 when it stopped for want of --live or --live-tools."""
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
    llm = agent_llm(store, run_id, make) if live and make is not None else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnusedChange)
        result = branch_run(
            store,
            run_id,
            at,
            llm_response=response,
            tool_result=outcome_given,
            config=changed,
            llm=llm,
            builder=make,
            live_tools=live_tools,
        )
    for warning in caught:
        if not isinstance(warning.message, UnusedChange):  # those are the result's notes
            warnings.showwarning(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    if as_json:
        click.echo(json.dumps(result.to_dict("cli"), indent=2, ensure_ascii=False))
    else:
        click.echo(printable(result.run_id))
        moves = [e.fact for e in Recording.load(store, result.run_id).entries]
        state = next((m.to_state for m in reversed(moves) if isinstance(m, f.Transitioned)), "Idle")
        said = result.said("cli", brief=True)  # why, and what to pass: on the needed line
        click.echo(
            f"  {result.status} (state {printable(state)})"
            + (f": {printable(said)}" if said else "")
        )
        for line in result.lines("cli"):
            click.echo(f"  {printable(line)}")
        for note in (*result.notes, *result.unused):
            click.echo(f"agentsm: warning: {printable(note)}", err=True)
    sys.exit(1 if result.status in ("failed", "aborted") else 2 if result.needed else 0)


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
            if request.kind == "question":
                click.echo(printable(f"question #{n} [{request.call.id}]: {request.reason}"))
                continue
            call = f"{request.call.name}({json.dumps(request.call.args, ensure_ascii=False)})"
            click.echo(printable(f"waiting #{n}: {call} [{request.call.id}] — {request.reason}"))
        if any(r.kind == "question" for r in e.requests):
            click.echo(f"Answer with: agentsm answer {printable(e.run_id)} TEXT")
        if any(r.kind != "question" for r in e.requests):
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


approve = _decision("approved", "approve")
reject = _decision("rejected", "reject")
modify = _decision("modified", "modify")

COMMANDS = [demo, replay, branch, resume, approve, reject, modify]
