"""The end of a trial: the fleet finishes its runs, and a run waiting for a human is answered
from the ledger, since only the ledger knows whether its write took effect."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Literal

from agentsm.tool_context import call_key
from eventstore import EventStore, StoreError

from ..resuming import decide, pending_requests
from .fleet import Fleet, note_exits
from .ledger import writes_taken
from .options import Options
from .report import Report, Violation

_ENDED = ("done", "failed", "aborted", "stopped", "waiting")


def drain(
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
            note_exits(fleet, report)
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
    """Approve each waiting write the ledger has not seen, reject those it has; how many."""
    taken = {key for key, _ in writes_taken(ledger)}
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
