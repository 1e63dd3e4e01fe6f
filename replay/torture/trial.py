"""One trial: a fresh log and ledger, runs submitted, a fleet of `agentsm worker` processes
started, the faults injected, the fleet drained, and every invariant checked."""

from __future__ import annotations

import os
import site
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ..source import load_builder, open_store
from .agent import LEDGER_ENV, PAUSE_ENV, WRITES_ENV
from .checks import check
from .drain import drain
from .faults import inject
from .fleet import Fleet, note_exits
from .monitor import Monitor
from .options import Options
from .report import Report

_IMPORT_ROOT = Path(__file__).resolve().parents[2]
"""The directory the harness's `replay` was imported from, so that the workers run the same."""


def torture(options: Options, workdir: Path | None = None) -> Report:
    """Run one trial and check it; the report holds the figures and every violation."""
    started = time.monotonic()
    report = Report(options)
    with tempfile.TemporaryDirectory(prefix="agentsm-torture-") as scratch:
        base = (workdir or Path(scratch)).resolve()
        base.mkdir(parents=True, exist_ok=True)
        url, worker_url, schema = _log_urls(options, base)
        report.where = url
        try:
            _trial(options, base, url, worker_url, schema, report)
        finally:
            if schema is not None and not options.keep:
                _drop_schema(options.postgres_url, schema)
    report.wall = time.monotonic() - started
    return report


def _log_urls(options: Options, base: Path) -> tuple[str, str, str | None]:
    """The log's URL for the harness, the workers' (their connections named, so that they can
    be cut and the harness's are spared), and the PostgreSQL schema."""
    if options.db == "sqlite":
        path = str(base / f"log-{options.seed}.db")
        return path, path, None
    schema = f"torture_{options.seed}_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in options.postgres_url else "?"
    url = f"{options.postgres_url}{sep}schema={schema}"
    return url, f"{url}&application_name={schema}_w", schema


def _worker_env(options: Options, ledger: Path) -> dict[str, str]:
    """The workers' environment: the agent's settings, faulthandler on, and the harness's
    `replay` first on the path unless it is installed in a site directory the workers see."""
    env = {
        **os.environ,
        LEDGER_ENV: str(ledger),
        PAUSE_ENV: str(options.pause),
        WRITES_ENV: str(options.writes),
        "PYTHONFAULTHANDLER": "1",
    }
    sites = {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    if _IMPORT_ROOT not in sites:
        env["PYTHONPATH"] = os.pathsep.join([str(_IMPORT_ROOT), os.environ.get("PYTHONPATH", "")])
    return env


def _trial(
    options: Options, base: Path, url: str, worker_url: str, schema: str | None, report: Report
) -> None:
    builder = load_builder(options.builder)
    ledger = base / f"ledger-{options.seed}.db"
    ledger.unlink(missing_ok=True)
    store = open_store(url, create=True)
    monitor = Monitor(url)
    try:
        ids = [builder(f"entry {n}").store(store).submit() for n in range(options.runs)]
        command = [sys.executable, "-m", "replay", "worker", "--builder", options.builder]
        command += ["--db", worker_url, "--poll", "0.05", "--lease", f"{options.lease:g}"]
        monitor.start()
        report.began = time.monotonic()
        fleet = Fleet(command, _worker_env(options, ledger), base, options.workers)
        try:
            _wait_ready(options, fleet, monitor, report)
            inject(options, fleet, schema, report)
            drain(options, store, fleet, ids, ledger, report)
        finally:
            note_exits(fleet, report)
            fleet.shut_down()
            monitor.halt.set()
            monitor.join(timeout=30)
        report.violations += check(store, ids, ledger, monitor, fleet.reports(), builder, report)
    finally:
        store.close()


def _wait_ready(options: Options, fleet: Fleet, monitor: Monitor, report: Report) -> None:
    """Wait (up to a minute) until every worker drives a run: starting takes a while on a busy
    machine, and faults are meant to land on workers at work."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len({p.pid for p in fleet.slots} & monitor.drivers) >= min(
            options.workers, options.runs
        ):
            break
        note_exits(fleet, report)
        time.sleep(0.02)
    report.note(f"workers at work: pids {sorted({p.pid for p in fleet.slots} & monitor.drivers)}")


def _drop_schema(server: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
