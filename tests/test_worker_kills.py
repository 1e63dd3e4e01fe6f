"""Worker processes on one log, killed (SIGKILL) at random points: every run still ends exactly
once, and the effect of a non-idempotent tool never happens twice."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from eventstore import EventStore
from replay import decide, pending_requests
from replay.cli.worker import submit_command

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
        "replay.cli.worker",
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


def test_a_run_whose_worker_is_killed_finishes_on_another_under_the_tail(
    log_url: str, tmp_path: Path
) -> None:
    """The README's walkthrough: submit, two workers, kill the one that drives the run in its
    payment, answer the question the run then asks, and `agentsm tail` shows it to the end."""
    example = f"{ROOT / 'examples' / 'worker_agent.py'}:make_agent"
    ledger = tmp_path / "payments.txt"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AGENTSM_EXAMPLE_LEDGER": str(ledger),
        "AGENTSM_EXAMPLE_PAY_SECONDS": "600",  # it is killed in its payment, pass or fail
        "NO_COLOR": "1",
    }
    store = connect(log_url)
    submitted = CliRunner().invoke(
        submit_command, ["Pay Ann 30", "--builder", example, "--db", log_url]
    )
    assert submitted.exit_code == 0, submitted.output
    run_id = submitted.output.strip()
    worker = [sys.executable, "-m", "replay.cli.worker", "--builder", example, "--db", log_url]
    worker += ["--poll", "0.1", "--lease", "1"]
    tail = [sys.executable, "-m", "replay.cli.tail", run_id, "--db", log_url, "--poll", "0.1"]
    with (tmp_path / "out.log").open("ab") as log:
        first = subprocess.Popen(worker, cwd=ROOT, env=env, stdout=log, stderr=log)
        processes = [first]
        try:
            follower = subprocess.Popen(
                tail, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True
            )
            processes.append(follower)
            deadline = time.monotonic() + 120
            while [e.kind for e in store.read(run_id)][-1] != "ToolCallStarted" or not (
                ledger.exists() and ledger.read_text().endswith("\n")
            ):  # its start recorded, and the payment written: it sleeps in its payment now
                assert time.monotonic() < deadline and first.poll() is None
                time.sleep(0.05)
            record = store.run(run_id)
            assert record.driver is not None and record.driver.pid == first.pid
            second = subprocess.Popen(worker, cwd=ROOT, env=env, stdout=log, stderr=log)
            processes.append(second)
            first.kill()  # in the middle of its payment
            first.wait(timeout=60)
            while store.run(run_id).status != "waiting":  # the other took it: did it pay?
                assert time.monotonic() < deadline and second.poll() is None
                time.sleep(0.05)
            assert len(ledger.read_text().splitlines()) == 1  # it did: do not pay again
            decide(store, run_id, "rejected", note="the payment went through")
            out, _ = follower.communicate(timeout=120)
        finally:
            for p in processes:
                p.kill()
                p.wait(timeout=60)
                if p.stdout is not None:
                    p.stdout.close()
    assert follower.returncode == 0 and store.run(run_id).status == "done"
    seqs = [int(line.split()[0]) for line in out.splitlines()]
    assert seqs == list(range(1, store.run(run_id).last_seq + 1))  # every fact, once, in order
    assert len(ledger.read_text().splitlines()) == 1
    assert "RunFinished" in out.splitlines()[-1]
