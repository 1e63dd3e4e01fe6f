"""The invariants, checked after the drain against the log, the catalog as the monitor saw it
change, what the workers printed, and the tools' ledger."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agentsm import State
from agentsm.memory import fold_with_state
from eventstore import EventStore, RunRecord, StoredEvent

from ..recording import Recording
from ..replaying import replay_run
from ..source import Builder
from .ledger import writes_taken
from .monitor import Monitor, Sample
from .report import Report, Violation

_PID = re.compile(r"@pid=(\d+)")


def check(
    store: EventStore,
    ids: list[str],
    ledger: Path,
    monitor: Monitor,
    reports: list[tuple[int, str, str, str]],
    builder: Builder,
    report: Report,
) -> list[Violation]:
    """Every violation of the trial's runs (counting their statuses, facts and replays into
    `report`) and of the ledger: a write that took effect twice, or a done run short of one."""
    found: list[Violation] = []
    said_done = {run_id for _, run_id, _, outcome in reports if outcome == "done"}
    for run_id in ids:
        record = store.run(run_id)
        report.statuses[record.status] += 1
        found += _check_run(
            store, record, monitor.timelines.get(run_id, []), run_id in said_done, builder, report
        )
    executions: dict[str, list[int]] = {}
    for key, pid in writes_taken(ledger):
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
    """One run's violations: not done or stranded, a fact lost, an abort, a late write, or a
    replay that differs."""
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
    found += late_writes(run_id, events, timeline)
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


def late_writes(run_id: str, events: list[StoredEvent], timeline: list[Sample]) -> list[Violation]:
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
