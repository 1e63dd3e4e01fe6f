"""`agentsm otel RUN... --endpoint URL`: send recorded runs as OpenTelemetry traces (OTLP/HTTP)."""

from __future__ import annotations

import os

import click

from ..source import open_store
from .common import example
from .shared import CommandFailed, db_option, reported

__all__ = ["otel_command"]


@click.command(
    "otel", epilog=example("agentsm otel 3f2a --endpoint http://localhost:4318 --content")
)
@click.argument("runs", nargs=-1, required=True)
@db_option
@click.option(
    "--endpoint",
    default=lambda: (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or "http://localhost:4318"
    ),
    show_default="$OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318",
    help="the OTLP/HTTP collector",
)
@click.option(
    "--content", is_flag=True, help="include message content (the recorded, redacted text)"
)
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True)
def otel_command(
    runs: tuple[str, ...], db: str, endpoint: str, content: bool, timeout: float
) -> None:
    """Send RUNS (ids or unique prefixes) as traces: an invoke_agent span per run, a chat span
    per LLM call, an execute_tool span per tool call (GenAI semantic conventions). Message
    content only with --content."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from ..otel import export_spans, quiet_sdk_logs, traces_url, unreachable
    except ImportError as e:
        raise CommandFailed(
            f"OpenTelemetry is not installed ({e}); install it with: pip install 'agentsm[otel]'"
        ) from e
    with reported():
        url = traces_url(endpoint)
    collected = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agentsm"}))
    provider.add_span_processor(SimpleSpanProcessor(collected))
    with reported():
        store = open_store(db, read_only=True)
        try:
            exported = [
                export_spans(store, run, tracer_provider=provider, capture_content=content)
                for run in runs
            ]
        finally:
            store.close()
    spans = collected.get_finished_spans()
    problem = unreachable(url, timeout=min(timeout, 3.0))
    if problem is not None:
        raise CommandFailed(
            f"No OTLP collector accepts connections at {url} ({problem}); start one there or "
            "give its address with --endpoint."
        )
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout)
    with quiet_sdk_logs():
        try:
            result = exporter.export(spans)
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]

    if result is not SpanExportResult.SUCCESS:
        raise CommandFailed(
            f"The collector at {url} did not take the {len(spans)} spans; check that an "
            "OTLP/HTTP receiver listens there (--endpoint) and try again."
        )
    ids = ", ".join(s.run_id for s in exported)
    click.echo(f"sent {len(spans)} spans of {len(exported)} run(s) ({ids}) to {url}")


if __name__ == "__main__":  # `python -m replay.cli.otel ...`: the command alone
    otel_command.main()  # pragma: no cover
