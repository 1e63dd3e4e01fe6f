"""Worker processes on one log, killed (SIGKILL) at random points: every run still ends exactly
once, and the effect of a non-idempotent tool never happens twice."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

from eventstore import EventStore
from replay import decide, pending_requests

from .stores import connect
from .worker_agent import make_agent

ROOT = Path(__file__).resolve().parent.parent
RUNS = 8
WORKERS = 3


def _unsettled(store: EventStore) -> list[str]:
    """Runs a worker still has to take or finish."""
    return [r.run_id for r in store.runs() if r.status in ("queued", "ready", "running")]


def _wait_settled(store: EventStore, workers: list[subprocess.Popen[bytes]], seed: int) -> None:
    """Wait until no run can go on (a bound on the wait, not a timing assertion)."""
    deadline = time.monotonic() + 180
    while _unsettled(store):
        alive = [w for w in workers if w.poll() is None]
        assert alive, f"every worker exited (seed {seed}): {[w.returncode for w in workers]}"
        assert time.monotonic() < deadline, f"runs never settled (seed {seed})"
        time.sleep(0.05)


def test_workers_killed_at_random_points_never_drive_a_run_twice(
    log_url: str, tmp_path: Path
) -> None:
    seed = int(os.environ.get("AGENTSM_TEST_SEED") or time.time_ns() % 1_000_000)
    rng = random.Random(seed)
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    env = {
        **os.environ,
        "AGENTSM_TEST_LEDGER": str(ledger),
        "AGENTSM_TEST_PAUSE": "0.3",
        "PYTHONPATH": str(ROOT),
    }
    store = connect(log_url)
    ids = [make_agent(f"entry {n}").store(store).submit() for n in range(RUNS)]
    command = [
        sys.executable,
        "-m",
        "replay.cli_worker",
        "--builder",
        "tests.worker_agent:make_agent",
        "--db",
        log_url,
        "--poll",
        "0.05",
        "--lease",
        "1.5",
    ]
    kills = decided = 0
    for _ in range(15):
        with (tmp_path / "workers.log").open("ab") as log:
            workers = [
                subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
                for _ in range(WORKERS)
            ]
        try:
            for victim in rng.sample(workers, WORKERS - 1):  # one is left to take over
                time.sleep(rng.uniform(0.3, 2.5))  # a random point of its work
                victim.kill()
                victim.wait(timeout=60)
                kills += 1
            _wait_settled(store, workers, seed)
        finally:
            for w in workers:
                w.kill()
                w.wait(timeout=60)
        # Every worker is dead now, so the ledger is final: a human who checks it answers each
        # run waiting on a write that was under way when its worker died.
        written = ledger.read_text()
        for record in store.runs():
            if record.status == "waiting":
                requests = pending_requests(store, record.run_id)
                assert [r.call.name for r in requests] == ["write"], (seed, requests)
                took_effect = f"\n{record.run_id}-" in "\n" + written
                decide(store, record.run_id, "rejected" if took_effect else "approved")
                decided += 1
        if all(store.run(i).status == "done" for i in ids):
            break
    statuses = {i: store.run(i).status for i in ids}
    assert set(statuses.values()) == {"done"}, f"seed {seed}: {statuses}"
    for run_id in ids:
        kinds = [e.kind for e in store.read(run_id)]
        assert kinds.count("RunFinished") == 1 and kinds[-1] == "RunFinished", (seed, kinds)
        assert kinds.count("RunStarted") == 1 and store.verify(run_id).ok, seed
    keys = [line.split(" ", 1)[0] for line in ledger.read_text().splitlines()]
    assert len(keys) == len(set(keys)), f"seed {seed}: an effect happened twice: {keys}"
    assert sorted(k.rsplit("-", 2)[0] for k in keys) == sorted(ids), seed  # once per run
    assert kills >= WORKERS - 1
    print(f"seed {seed}: {kills} workers killed, {decided} decisions, all {RUNS} runs done once")
