"""`agentsm steer`, `answer` and `stop`: what a person sends a run from outside, whichever
process or host drives it."""

from __future__ import annotations

import os

import click

from ..outside import answer, request_stop, steer
from ..render import printable
from .common import common, example, open_log

__all__ = ["COMMANDS"]


def _resume_hint(run: str) -> str:
    builder = "" if os.environ.get("AGENTSM_BUILDER") else " --builder ..."
    return f"agentsm resume {run}{builder}"


@click.command(
    "steer",
    epilog=example(
        "agentsm steer 3f2a 'give the temperatures in Celsius'",
        "agentsm steer 3f2a 'stop after the first three results' --db postgresql://db/agents",
    ),
)
@click.argument("run")
@click.argument("text")
@common
def steer_command(run: str, text: str) -> None:
    """Send a running run a message: its LLM reads it before its next call, whichever
    process or host drives the run (a run that waits takes it when it goes on)."""
    store = open_log(write=True)
    try:
        run_id = store.resolve(run)
        n = steer(store, run_id, text)
        status = store.run(run_id).status
    finally:
        store.close()
    when = (
        "its driver takes it at its next transition"
        if status == "running"
        else f"it is {status}: it takes it when it goes on"
    )
    click.echo(printable(f"message {n} sent to run {run_id}; {when}"))


@click.command(
    "answer",
    epilog=example(
        "agentsm answer 3f2a 'the Paris office'",
        "agentsm answer 3f2a 'yes, both' --call '#2'",
    ),
)
@click.argument("run")
@click.argument("text")
@click.option(
    "--call",
    metavar="ID",
    help="the question: its call id, a unique prefix, or #N among what the run waits on "
    "(default: the first question)",
)
@click.option("--force", is_flag=True, help="answer even though a live process drives the run")
@common
def answer_command(run: str, text: str, call: str | None, force: bool) -> None:
    """Answer the question a waiting run asked a person (its ask_human tool, or a handler's
    ctx.ask); the run is ready to go on once nothing else waits."""
    store = open_log(write=True)
    try:
        run_id = store.resolve(run)
        done = answer(store, run_id, text, call_id=call, force=force)
    finally:
        store.close()
    click.echo(printable(f"answered {done.request.reason!r}"))
    if done.waiting:
        click.echo(
            printable(
                "still waiting for: "
                + ", ".join(f"#{n} {r.call.id}" for n, r in enumerate(done.waiting, start=1))
            )
        )
    else:
        click.echo(
            "recorded (status ready): a running `agentsm worker` takes it up, or continue with: "
            + printable(_resume_hint(run_id))
        )


@click.command(
    "stop",
    epilog=example("agentsm stop 3f2a", "agentsm stop 3f2a --reason 'wrong customer'"),
)
@click.argument("run")
@click.option("--reason", default="", help="why, recorded with the stop")
@common
def stop_command(run: str, reason: str) -> None:
    """Stop a run: the process or worker that drives it (on any host) stops it at its next
    transition; a run nobody drives is stopped at once. `agentsm resume` goes on from there."""
    store = open_log(write=True)
    try:
        run_id = store.resolve(run)
        how = request_stop(store, run_id, reason)
    finally:
        store.close()
    said = (
        "stop requested: its driver stops it at its next transition (status stopped)"
        if how == "requested"
        else "stopped"
    )
    click.echo(printable(f"{run_id}: {said}; continue it with: {_resume_hint(run_id)}"))


COMMANDS = [steer_command, answer_command, stop_command]
