"""A torture harness for `agentsm worker` fleets: runs submitted to W worker processes that are
killed (SIGKILL, then replaced), paused past their lease (SIGSTOP, later SIGCONT) and, on
PostgreSQL, cut from the server (`pg_terminate_backend`), at points a seeded RNG picks; then the
fleet drains and the log, the catalog and the tools' ledger are checked.

Run it from the repository's root (the workers' agent is `tests/torture_agent.py`):

    python -m replay.torture --db sqlite|postgres --runs N --workers W --faults F --seed S \
        --lease SECONDS

It prints its figures and every violation, and exits 1 on any. `tests/test_worker_torture.py`
runs a short trial on each backend.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import click

from agentsm import State
from agentsm.memory import fold_with_state
from agentsm.tool_context import call_key
from eventstore import EventStore, RunRecord, StoredEvent, StoreError

from .recording import Recording
from .replaying import replay_run
from .resuming import decide, pending_requests
from .source import Builder, load_builder, open_store

__all__ = ["INVARIANTS", "Options", "Report", "Violation", "torture"]

ROOT = Path(__file__).resolve().parent.parent
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
INVARIANTS = {
    "done": "every run ends done",
    "stranded": "no run left running with no lease (no worker can take it)",
    "lost_fact": "no fact lost (chain verifies, log folds to Done, reported ends are logged)",
    "late_write": "no fact written by a driver that had lost the run",
    "fault_abort": "no run aborted or set aside because of a store fault",
    "effect_once": "each write took effect once (ledger), never twice",
    "worker_exit": "no worker exits on its own",
    "replay": "every finished run replays identical",
}
_PID = re.compile(r"@pid=(\d+)")
_RESULT = re.compile(r"^(\S+) \((\w+)\) -> (\w+)")
_ENDED = ("done", "failed", "aborted", "stopped", "waiting")


@dataclass(frozen=True)
class Options:
    """One trial: the backend, the fleet, the faults, and how long the agent's effects take."""

    db: Literal["sqlite", "postgres"] = "sqlite"
    runs: int = 20
    workers: int = 3
    faults: int = 12
    seed: int = 1
    lease: float = 1.0
    pause: float = 0.3
    writes: int = 2
    drain: float = 60.0
    builder: str = "tests.torture_agent:make_agent"
    postgres_url: str = POSTGRES_URL
    keep: bool = False


@dataclass(frozen=True)
class Violation:
    """One invariant broken: which (a key of INVARIANTS), where (a run id, or a worker's pid)
    and what the log, the catalog or the ledger showed."""

    invariant: str
    run_id: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.invariant}] {self.run_id}: {self.detail}"


@dataclass
class Report:
    """A trial's figures, its timeline (`log`: faults, resumptions, drain) and violations."""

    options: Options
    where: str = ""
    statuses: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    facts: int = 0
    replays: int = 0
    decisions: int = 0
    violations: list[Violation] = field(default_factory=list)
    wall: float = 0.0
    log: list[str] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)
    """When the workers were started: the origin of the fault times and of the log."""

    def note(self, text: str) -> None:
        self.log.append(f"t={time.monotonic() - self.began:6.2f}s {text}")

    def table(self) -> str:
        o = self.options
        rows = [
            ("backend", f"{o.db} ({self.where})"),
            ("seed / lease", f"{o.seed} / {o.lease:g} s"),
            (
                "runs",
                f"{o.runs} ({', '.join(f'{k} {v}' for k, v in sorted(self.statuses.items()))})",
            ),
            ("workers", str(o.workers)),
            *((f"faults: {k}", str(v)) for k, v in sorted(self.faults.items())),
            ("human decisions", str(self.decisions)),
            ("facts checked", str(self.facts)),
            ("replays", str(self.replays)),
            ("wall time", f"{self.wall:.1f} s"),
        ]
        found = Counter(v.invariant for v in self.violations)
        rows += [(f"violations: {k}", str(found[k])) for k in INVARIANTS]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


@dataclass(frozen=True)
class Fault:
    """One planned fault: `at` seconds into the chaos, on the worker of `slot`."""

    at: float
    kind: Literal["kill", "stop", "pg_terminate"]
    slot: int
    hold: float = 0.0


def plan(options: Options) -> list[Fault]:
    """The faults of a trial, from the seed alone: as many of each kind, in a shuffled order,
    at times spread over the stretch the runs are expected to take (after the workers start),
    each on a worker that is not paused then."""
    rng = random.Random(options.seed)
    kinds: list[Literal["kill", "stop", "pg_terminate"]] = ["kill", "stop"]
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


class Fleet:
    """The worker processes, one per slot; a slot whose process dies is given a new one."""

    def __init__(self, command: list[str], env: dict[str, str], logs: Path, size: int) -> None:
        self.command, self.env, self.logs = command, env, logs
        self.every: list[subprocess.Popen[bytes]] = []
        self.ended_by_us: set[int] = set()
        self.slots = [self._start() for _ in range(size)]

    def _start(self) -> subprocess.Popen[bytes]:
        with (self.logs / f"worker-{len(self.every)}.log").open("ab") as out:
            process = subprocess.Popen(self.command, cwd=ROOT, env=self.env, stdout=out, stderr=out)
        self.every.append(process)
        return process

    def kill(self, slot: int) -> int:
        victim = self.slots[slot]
        self.ended_by_us.add(victim.pid)
        victim.kill()
        victim.wait(timeout=60)
        self.slots[slot] = self._start()
        return victim.pid

    def exited(self) -> list[tuple[int, int | None, str]]:
        """Workers that exited without being told to (pid, code, last output), replaced."""
        gone = []
        for slot, process in enumerate(self.slots):
            if process.poll() is not None and process.pid not in self.ended_by_us:
                self.ended_by_us.add(process.pid)
                log = (self.logs / f"worker-{self.every.index(process)}.log").read_text(
                    "utf-8", "replace"
                )
                said = [line for line in log.splitlines() if not line.startswith("discarding")]
                gone.append((process.pid, process.returncode, " | ".join(said[-2:])))
                self.slots[slot] = self._start()
        return gone

    def shut_down(self) -> None:
        for process in self.every:
            if process.poll() is None:
                self.ended_by_us.add(process.pid)
                process.send_signal(signal.SIGCONT)
                process.terminate()
        for process in self.every:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=60)

    def reports(self) -> list[tuple[int, str, str, str]]:
        """What the workers printed: (pid, run id, how claimed, outcome) per run driven."""
        found = []
        for n, process in enumerate(self.every):
            for line in (self.logs / f"worker-{n}.log").read_text("utf-8", "replace").splitlines():
                if m := _RESULT.match(line):
                    found.append((process.pid, m[1], m[2], m[3]))
        return found


@dataclass(frozen=True)
class Sample:
    """A run's catalog row as the monitor saw it (kept when it changed)."""

    at: float
    status: str
    pid: int | None
    last_seq: int
    leased: bool


class Monitor(threading.Thread):
    """Samples the catalog every few milliseconds: each run's status, driver and last seq as
    they change (who held a run when each of its facts was committed)."""

    def __init__(self, url: str) -> None:
        super().__init__(name="torture monitor", daemon=True)
        self.url = url
        self.timelines: dict[str, list[Sample]] = {}
        self.halt = threading.Event()
        self.drivers: set[int] = set()
        """Every pid seen driving a run."""

    def run(self) -> None:
        store = open_store(self.url)
        try:
            while not self.halt.wait(0.005):
                try:
                    records = store.runs()
                except StoreError:
                    continue
                for r in records:
                    s = Sample(
                        time.time(),
                        r.status,
                        r.driver.pid if r.driver else None,
                        r.last_seq,
                        r.lease_until is not None,
                    )
                    if s.pid is not None:
                        self.drivers.add(s.pid)
                    line = self.timelines.setdefault(r.run_id, [])
                    if not line or (
                        line[-1].status,
                        line[-1].pid,
                        line[-1].last_seq,
                        line[-1].leased,
                    ) != (s.status, s.pid, s.last_seq, s.leased):
                        line.append(s)
        finally:
            store.close()


def torture(options: Options, workdir: Path | None = None) -> Report:
    """Run one trial and check it; the report holds the figures and every violation."""
    started = time.monotonic()
    report = Report(options)
    with tempfile.TemporaryDirectory(prefix="agentsm-torture-") as scratch:
        base = workdir or Path(scratch)
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
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "AGENTSM_TORTURE_LEDGER": str(ledger),
            "AGENTSM_TORTURE_PAUSE": str(options.pause),
            "AGENTSM_TORTURE_WRITES": str(options.writes),
            "PYTHONFAULTHANDLER": "1",
        }
        command = [sys.executable, "-m", "replay", "worker", "--builder", options.builder]
        command += ["--db", worker_url, "--poll", "0.05", "--lease", f"{options.lease:g}"]
        monitor.start()
        report.began = time.monotonic()
        fleet = Fleet(command, env, base, options.workers)
        try:
            _wait_ready(options, fleet, monitor, report)
            _chaos(options, fleet, schema, report)
            _drain(options, store, fleet, ids, ledger, report)
        finally:
            _note_exits(fleet, report)
            fleet.shut_down()
            monitor.halt.set()
            monitor.join(timeout=30)
        report.violations += _check(store, ids, ledger, monitor, fleet.reports(), builder, report)
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
        _note_exits(fleet, report)
        time.sleep(0.02)
    report.note(f"workers at work: pids {sorted({p.pid for p in fleet.slots} & monitor.drivers)}")


def _chaos(options: Options, fleet: Fleet, schema: str | None, report: Report) -> None:
    """Inject the planned faults at their times; SIGCONT each paused worker after its hold."""
    start = time.monotonic()
    resume: list[tuple[float, subprocess.Popen[bytes]]] = []
    for fault in plan(options):
        while (now := time.monotonic() - start) < fault.at:
            resume = _resume_due(resume, now, report)
            _note_exits(fleet, report)
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
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "current_database() AND pid <> pg_backend_pid() AND application_name = %s",
            (application,),
        ).fetchall()
    return len(rows)


def _drop_schema(server: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _note_exits(fleet: Fleet, report: Report) -> None:
    for pid, code, last in fleet.exited():
        report.note(f"{'exit':<12} pid {pid} exited by itself ({code}); replaced")
        report.violations.append(
            Violation("worker_exit", f"pid {pid}", f"exited with status {code}: {last}")
        )


def _drain(
    options: Options, store: EventStore, fleet: Fleet, ids: list[str], ledger: Path, report: Report
) -> None:
    """Let the workers finish (within `options.drain` seconds); a run waiting for a human is
    answered from the ledger (did its write take effect?) once paused workers had time to end
    the tools they were in."""
    deadline = time.monotonic() + options.drain
    time.sleep(options.pause * 2 + 0.5)
    while time.monotonic() < deadline:
        stranded: dict[str, float] = {}
        while time.monotonic() < deadline and not _settled(store, ids, stranded, options.lease):
            _note_exits(fleet, report)
            time.sleep(0.05)
        answered = _answer_waiting(store, ids, ledger, report)
        report.note(f"settled; {answered} waiting calls answered from the ledger")
        if not answered:
            return
        report.decisions += answered
    report.note(f"drain bound ({options.drain:g} s) reached")
    _dump_hung(store, ids, fleet, report)


def _dump_hung(store: EventStore, ids: list[str], fleet: Fleet, report: Report) -> None:
    """SIGABRT the live workers that still hold a run after the drain: Python's faulthandler
    (PYTHONFAULTHANDLER) writes every thread's stack to the worker's log, to see where it hangs."""
    for run_id in ids:
        record = store.run(run_id)
        for n, process in enumerate(fleet.every):
            held = record.driver is not None and record.driver.pid == process.pid
            if held and record.status == "running" and process.poll() is None:
                fleet.ended_by_us.add(process.pid)
                process.send_signal(signal.SIGABRT)
                report.note(
                    f"{'abort':<12} pid {process.pid} still holds {run_id}: SIGABRT, "
                    f"its threads' stacks in {fleet.logs / f'worker-{n}.log'}"
                )


def _settled(store: EventStore, ids: list[str], stranded: dict[str, float], lease: float) -> bool:
    """Whether no run can go on: each ended (or waits for a human), or has been running with
    no lease for longer than two leases (nothing will take it)."""
    now = time.monotonic()
    for run_id in ids:
        r = store.run(run_id)
        if r.status in _ENDED:
            continue
        if r.status == "running" and r.lease_until is None:
            if now - stranded.setdefault(run_id, now) > 2 * lease:
                continue
        else:
            stranded.pop(run_id, None)
        return False
    return True


def _answer_waiting(store: EventStore, ids: list[str], ledger: Path, report: Report) -> int:
    taken = {key for key, _ in _ledger_rows(ledger)}
    answered = 0
    for run_id in ids:
        while store.run(run_id).status == "waiting" and (asked := pending_requests(store, run_id)):
            key = call_key(run_id, asked[0].step, asked[0].index)
            verdict: Literal["approved", "rejected"] = "rejected" if key in taken else "approved"
            try:
                decide(store, run_id, verdict, call_id="#1", note=f"ledger: {key} {verdict}")
            except (StoreError, ValueError) as e:
                report.violations.append(Violation("done", run_id, f"could not decide: {e}"))
                break
            answered += 1
    return answered


def _ledger_rows(ledger: Path) -> list[tuple[str, int]]:
    """(key, pid) of every execution of a non-idempotent tool."""
    if not ledger.exists():
        return []
    conn = sqlite3.connect(ledger, timeout=60)
    try:
        return list(conn.execute("SELECT key, pid FROM effects WHERE idempotent = 0 ORDER BY at"))
    finally:
        conn.close()


def _check(
    store: EventStore,
    ids: list[str],
    ledger: Path,
    monitor: Monitor,
    reports: list[tuple[int, str, str, str]],
    builder: Builder,
    report: Report,
) -> list[Violation]:
    found: list[Violation] = []
    said_done = {run_id for _, run_id, _, outcome in reports if outcome == "done"}
    for run_id in ids:
        record = store.run(run_id)
        report.statuses[record.status] += 1
        found += _check_run(
            store, record, monitor.timelines.get(run_id, []), run_id in said_done, builder, report
        )
    executions: dict[str, list[int]] = {}
    for key, pid in _ledger_rows(ledger):
        executions.setdefault(key, []).append(pid)
    for key, pids in executions.items():
        if len(pids) > 1:
            found.append(
                Violation(
                    "effect_once",
                    key.rsplit("-", 2)[0],
                    f"write {key} took effect {len(pids)} times, by pids {pids}",
                )
            )
    for run_id in ids:
        keys = [k for k in executions if k.rsplit("-", 2)[0] == run_id]
        if store.run(run_id).status == "done" and len(keys) != report.options.writes:
            found.append(
                Violation(
                    "effect_once",
                    run_id,
                    f"{len(keys)} writes took effect, not {report.options.writes}: {keys}",
                )
            )
    return found


def _check_run(
    store: EventStore,
    record: RunRecord,
    timeline: list[Sample],
    said_done: bool,
    builder: Builder,
    report: Report,
) -> list[Violation]:
    run_id = record.run_id
    found: list[Violation] = []

    def violation(invariant: str, detail: str) -> None:
        found.append(Violation(invariant, run_id, detail))

    events = store.read(run_id)
    kinds = [e.kind for e in events] or ["nothing"]
    report.facts += len(events)
    if record.status == "running" and record.lease_until is None:
        violation(
            "stranded",
            f"still running at seq {record.last_seq} after the drain, with no driver and no "
            f"lease; last fact {kinds[-1]}",
        )
    elif record.status != "done":
        violation(
            "done",
            f"{record.status} at seq {record.last_seq} after the drain"
            + (f" ({record.summary.error})" if record.summary.error else ""),
        )
    chain = store.verify(run_id)
    if not chain.ok:
        violation("lost_fact", f"chain does not verify: {chain}")
    if [e.seq for e in events] != list(range(1, record.last_seq + 1)):
        violation("lost_fact", f"seqs are not 1..{record.last_seq}")
    state = fold_with_state(e.fact for e in Recording.load(store, run_id).entries)[1]
    if record.status == "done" and (
        state != State.Done or kinds[-1] != "RunFinished" or kinds.count("RunFinished") != 1
    ):
        violation("lost_fact", f"status done, but the log folds to {state} ending in {kinds[-1]}")
    if said_done and kinds[-1] != "RunFinished":
        violation(
            "lost_fact",
            f"a worker reported it done, but its log ends in {kinds[-1]} (status {record.status})",
        )
    for e in events:
        if e.kind == "RunAborted":
            fact = json.loads(e.payload)
            message = f"{fact['error_type']}: {fact['message']}"
            # its driver had just been told that another appended or took the run
            refused = any(w in message for w in ("ConcurrencyError", "LeaseLost", "not by this"))
            violation(
                "late_write" if refused else "fault_abort",
                f"RunAborted at seq {e.seq}"
                + (" written after the driver's append was refused" if refused else "")
                + f": {message[:200]}",
            )
    for before, after in zip(timeline, timeline[1:], strict=False):
        if after.status in ("aborted", "stopped") and before.status != after.status:
            violation(
                "fault_abort", f"status {before.status} -> {after.status} at seq {after.last_seq}"
            )
    found += _late_writes(run_id, events, timeline)
    if record.status == "done":
        report.replays += 1
        try:
            replayed = replay_run(store, run_id, builder)
        except Exception as e:  # the replay itself broke: a violation of its own, not a crash
            violation("replay", f"replay raised {type(e).__name__}: {e}")
        else:
            if not replayed.identical:
                violation("replay", " ".join(str(replayed).split())[:300])
    return found


def _late_writes(run_id: str, events: list[StoredEvent], timeline: list[Sample]) -> list[Violation]:
    """Facts written by a process that did not hold the run: one held by another pid just
    before and just after the fact was committed, or a pid back at the run after another took
    it over, without being seen claiming it again (one violation per fact)."""
    found: dict[int, str] = {}
    owners = [
        (e.seq, e.kind, int(m[-1]))
        for e in events
        if e.kind in ("LlmResponded", "ToolExecuted") and (m := _PID.findall(e.payload))
    ]
    for n, (seq, kind, pid) in enumerate(owners):
        before = [s for s in timeline if s.last_seq < seq]
        after = [s for s in timeline if s.last_seq >= seq]
        if before and after and before[-1].pid == after[0].pid and after[0].pid not in (None, pid):
            found[seq] = f"seq {seq} {kind} written by pid {pid} while pid {after[0].pid} held it"
            continue
        mine = [s for s, _, p in owners[:n] if p == pid]
        others = [s for s, _, p in owners[:n] if p != pid and mine and s > max(mine)]
        others = [s for s in others if s not in found]  # a late write took nothing over
        if others and not any(s.pid == pid and min(others) <= s.last_seq < seq for s in timeline):
            found[seq] = (
                f"seq {seq} {kind} written by pid {pid} after another pid took the run over at "
                f"seq {min(others)}, with no new claim by {pid} seen"
            )
    return [Violation("late_write", run_id, text) for text in found.values()]


@click.command()
@click.option(
    "--db", type=click.Choice(["sqlite", "postgres"]), default="sqlite", show_default=True
)
@click.option("--runs", default=20, show_default=True, help="runs submitted")
@click.option("--workers", default=3, show_default=True, help="worker processes")
@click.option("--faults", default=12, show_default=True, help="faults injected (kinds in turn)")
@click.option("--seed", default=1, show_default=True, help="seeds the faults: what, whom, when")
@click.option("--lease", default=1.0, show_default=True, help="the workers' lease, seconds")
@click.option(
    "--pause",
    type=click.FloatRange(0, 1),
    default=0.3,
    show_default=True,
    help="a tool takes up to twice this, seconds",
)
@click.option("--drain", default=60.0, show_default=True, help="longest wait for the end")
@click.option("--postgres-url", default=POSTGRES_URL, show_default=True)
@click.option("--keep", type=click.Path(path_type=Path), default=None, help="keep logs here")
def main(
    db: Literal["sqlite", "postgres"],
    runs: int,
    workers: int,
    faults: int,
    seed: int,
    lease: float,
    pause: float,
    drain: float,
    postgres_url: str,
    keep: Path | None,
) -> None:
    """Torture a worker fleet and check its invariants; exit 1 on any violation."""
    options = Options(
        db,
        runs,
        workers,
        faults,
        seed,
        lease,
        pause,
        drain=drain,
        postgres_url=postgres_url,
        keep=keep is not None,
    )
    report = torture(options, keep)
    click.echo("\n".join(report.log))
    click.echo(report.table())
    for v in report.violations:
        click.echo(str(v))
    sys.exit(1 if report.violations else 0)


if __name__ == "__main__":
    main()
