"""The faults of a trial: planned from the seed alone, then injected into the fleet at their
times (SIGKILL, SIGSTOP until SIGCONT, and on PostgreSQL `pg_terminate_backend`)."""

from __future__ import annotations

import math
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Literal

from .fleet import Fleet, note_exits
from .options import Options
from .report import Report

Kind = Literal["kill", "stop", "pg_terminate"]


@dataclass(frozen=True)
class Fault:
    """One planned fault: `at` seconds into the chaos, on the worker of `slot`."""

    at: float
    kind: Kind
    slot: int
    hold: float = 0.0


def plan(options: Options) -> list[Fault]:
    """The faults of a trial, from the seed alone: as many of each kind, in a shuffled order,
    at times spread over the stretch the runs are expected to take (after the workers start),
    each on a worker that is not paused then."""
    rng = random.Random(options.seed)
    kinds: list[Kind] = ["kill", "stop"]
    if options.db == "postgres":
        kinds.append("pg_terminate")
    chosen = (kinds * math.ceil(options.faults / len(kinds)))[: options.faults]
    rng.shuffle(chosen)
    window = max(1.5, options.runs * (options.writes + 1) * options.pause * 1.5 / options.workers)
    paused = [0.0] * options.workers  # until when each slot's worker is paused
    faults = []
    for at, kind in zip(sorted(rng.uniform(0.1, window) for _ in chosen), chosen, strict=True):
        free = [n for n in range(options.workers) if paused[n] <= at] or list(
            range(options.workers)
        )
        slot = rng.choice(free)
        hold = options.lease * rng.uniform(1.5, 3.0) if kind == "stop" else 0.0
        paused[slot] = at + hold if kind == "stop" else 0.0
        faults.append(Fault(at, kind, slot, hold))
    return faults


def inject(options: Options, fleet: Fleet, schema: str | None, report: Report) -> None:
    """Inject the planned faults at their times; SIGCONT each paused worker after its hold."""
    start = time.monotonic()
    resume: list[tuple[float, subprocess.Popen[bytes]]] = []
    for fault in plan(options):
        while (now := time.monotonic() - start) < fault.at:
            resume = _resume_due(resume, now, report)
            note_exits(fleet, report)
            time.sleep(0.01)
        victim = fleet.slots[fault.slot]
        if fault.kind == "kill":
            fleet.kill(fault.slot)
            what = f"SIGKILL pid {victim.pid}"
        elif fault.kind == "stop":
            victim.send_signal(signal.SIGSTOP)
            resume.append((now + fault.hold, victim))
            what = f"SIGSTOP pid {victim.pid} for {fault.hold:.2f} s"
        else:
            assert schema is not None
            what = (
                f"pg_terminate_backend: {_terminate(options.postgres_url, f'{schema}_w')} backends"
            )
        report.faults[fault.kind] += 1
        report.note(f"{fault.kind:<12} {what}")
    while resume:
        resume = _resume_due(resume, time.monotonic() - start, report)
        time.sleep(0.01)


def _resume_due(
    resume: list[tuple[float, subprocess.Popen[bytes]]], now: float, report: Report
) -> list[tuple[float, subprocess.Popen[bytes]]]:
    for at, process in resume:
        if at <= now and process.poll() is None:
            process.send_signal(signal.SIGCONT)
            report.note(f"{'cont':<12} SIGCONT pid {process.pid}")
    return [(at, p) for at, p in resume if at > now and p.poll() is None]


def _terminate(server: str, application: str) -> int:
    """Cut every connection the workers hold (named `application`); how many were cut."""
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "current_database() AND pid <> pg_backend_pid() AND application_name = %s",
            (application,),
        ).fetchall()
    return len(rows)
