"""`agentsm worker` (claim runs that can go on and drive them) and `agentsm submit`."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any

import click

from agentsm import AgentEngine

from ..render import printable
from ..resuming import Around
from ..source import load_builder, open_store
from ..worker import Worker, WorkResult
from .common import example
from .shared import CommandFailed, db_option, reported

__all__ = ["submit_command", "worker_command"]

BUILDER_HELP = (
    "your agent: module:factory or path/to/file.py:factory, where factory(task) -> AgentBuilder"
)


def _print(result: WorkResult) -> None:
    click.echo(printable(str(result)))  # recorded text, its control characters escaped


@click.command(
    "worker",
    epilog=example(
        "agentsm worker --builder myagent:make_agent",
        "agentsm worker --builder myagent:make_agent --once --db postgresql://db/agents",
    ),
)
@click.option("--builder", "spec", envvar="AGENTSM_BUILDER", required=True, help=BUILDER_HELP)
@db_option
@click.option("--once", is_flag=True, help="drive the runs that can go on now, then exit")
@click.option(
    "--poll",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="longest sleep in seconds between looks for work",
)
@click.option(
    "--lease",
    type=click.FloatRange(min=0.1),
    default=None,
    help="seconds a claim lasts without renewal (default: the store's, 60); after a worker "
    "dies, its runs go to another worker once this has passed",
)
@click.option(
    "--otel-endpoint",
    default=None,
    help="send each run's spans, live, to this OTLP/HTTP collector (needs agentsm[otel])",
)
@click.option("--otel-content", is_flag=True, help="with --otel-endpoint: add message content")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(["queued", "ready", "orphaned"]),
    help="take only these runs (repeatable; default: all three)",
)
def worker_command(
    spec: str,
    db: str,
    once: bool,
    poll: float,
    lease: float | None,
    otel_endpoint: str | None,
    otel_content: bool,
    kinds: tuple[str, ...],
) -> None:
    """Claim runs that can go on (submitted, decided by a human, or left by a dead worker) and
    drive each to its end; one line per run. SIGTERM stops it once the run in hand is done;
    Ctrl-C stops that run at once (status stopped, for `agentsm resume`)."""
    with reported():
        builder = load_builder(spec)
        around, flush = _tracing(otel_endpoint, otel_content)
        options: dict[str, Any] = {} if lease is None else {"lease": lease}
        store = open_store(db, **options)
    worker = Worker(
        store,
        builder,
        kinds=kinds or ("queued", "ready", "orphaned"),
        poll=poll,
        on_result=_print,
        around=around,
        on_error=lambda message: click.echo(f"agentsm worker: {message}", err=True),
    )
    try:
        with reported():
            if once:
                worker.drain()
                return
            stop = threading.Event()

            def ask_to_stop(signum: int, frame: FrameType | None) -> None:
                stop.set()

            previous = signal.signal(signal.SIGTERM, ask_to_stop)
            try:
                worker.run_forever(stop)
            except KeyboardInterrupt:
                click.echo("agentsm worker: interrupted.", err=True)
            finally:
                signal.signal(signal.SIGTERM, previous)
    finally:
        store.close()
        flush()


def _tracing(endpoint: str | None, content: bool) -> tuple[Around | None, Callable[[], None]]:
    """What wraps each run to trace it live, and what flushes the spans at the end."""
    if endpoint is None:
        return None, lambda: None
    try:
        from ..otel import otlp_provider, traced
    except ImportError as e:
        raise CommandFailed(
            f"OpenTelemetry is not installed ({e}); install it with: pip install 'agentsm[otel]'"
        ) from e
    provider = otlp_provider(
        endpoint, on_error=lambda message: click.echo(f"agentsm worker: {message}", err=True)
    )

    def around(engine: AgentEngine) -> AbstractContextManager[object]:
        return traced(engine, tracer_provider=provider, capture_content=content)

    return around, provider.shutdown


@click.command("submit", epilog=example('agentsm submit "Pay Ann 30" --builder myagent:make_agent'))
@click.argument("task")
@click.option("--builder", "spec", envvar="AGENTSM_BUILDER", required=True, help=BUILDER_HELP)
@db_option
def submit_command(task: str, spec: str, db: str) -> None:
    """Record a run of TASK to run later (status queued) and print its id: a worker runs it."""
    with reported():
        builder = load_builder(spec)(task)
        store = open_store(db, create=True)
        try:
            click.echo(builder.store(store).submit())
        finally:
            store.close()


if __name__ == "__main__":  # `python -m replay.cli.worker ...`: the command alone
    sys.exit(worker_command.main(standalone_mode=True))  # pragma: no cover
