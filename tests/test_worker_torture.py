"""A short trial of the worker torture harness (`replay.torture`) on each backend: six runs,
three workers killed, paused past their lease and (PostgreSQL) cut from the server at points
the seed picks; every invariant must hold. AGENTSM_TEST_SEED picks another seed; the long
version is `python -m replay.torture`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from eventstore import StoredEvent
from replay.torture import Options, Sample, plan, torture
from replay.torture.checks import late_writes

from .backends import POSTGRES_URL, require_postgres

SEED = int(os.environ.get("AGENTSM_TEST_SEED") or 1)


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_a_worker_fleet_under_faults_keeps_every_invariant(
    db: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server = require_postgres(request) if db == "postgres" else POSTGRES_URL
    options = Options(
        db="postgres" if db == "postgres" else "sqlite",
        runs=6,
        workers=3,
        faults=9 if db == "postgres" else 6,  # three of each kind
        seed=SEED,
        lease=1.0,
        pause=0.25,
        drain=15.0,
        postgres_url=server,
    )
    report = torture(options, tmp_path)
    print(report.table())
    assert not report.violations, (
        f"seed {SEED} on {db} (AGENTSM_TEST_SEED={SEED} to reproduce; logs in {tmp_path}):\n"
        + "\n".join(report.log)
        + "\n"
        + "\n".join(map(str, report.violations))
    )


def test_the_faults_follow_from_the_seed_alone() -> None:
    options = Options(db="postgres", runs=6, workers=3, faults=9, seed=SEED)
    faults = plan(options)
    assert (
        faults == plan(options) != plan(Options(db="postgres", workers=3, faults=9, seed=SEED + 1))
    )
    assert sorted(f.kind for f in faults) == ["kill"] * 3 + ["pg_terminate"] * 3 + ["stop"] * 3


def _fact(seq: int, kind: str, pid: int | None = None) -> StoredEvent:
    payload = f'{{"observation": "wrote @pid={pid}"}}' if pid else "{}"
    return StoredEvent("r", seq, kind, payload, {}, 0.0, 1)


def _held(*rows: tuple[int | None, int]) -> list[Sample]:
    """A monitor's timeline: (driver pid, last seq) as the catalog showed them, in turn."""
    return [Sample(0.0, "running", pid, seq, pid is not None) for pid, seq in rows]


def test_a_fact_from_a_superseded_driver_is_a_late_write() -> None:
    log = [_fact(1, "RunStarted"), _fact(2, "LlmResponded", 100), _fact(3, "ToolExecuted", 100)]
    log += [_fact(4, "LlmResponded", 200), _fact(5, "ToolExecuted", 100)]
    log += [_fact(6, "LlmResponded", 200)]
    seen = _held((100, 1), (100, 3), (200, 3), (200, 4), (200, 5), (200, 6))
    [late] = late_writes("r", log, seen)
    assert late.invariant == "late_write" and "seq 5" in late.detail and "pid 200" in late.detail
    [missed] = late_writes("r", log, seen[:3])  # the monitor missed the samples around it
    assert "seq 5" in missed.detail and "no new claim by 100" in missed.detail
    again = _held((100, 1), (100, 3), (200, 3), (200, 4), (100, 4), (100, 5), (None, 6))
    log[-1] = _fact(6, "LlmResponded", 100)
    assert late_writes("r", log, again) == []  # 100 claimed the run again: not late
