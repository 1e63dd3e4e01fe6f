"""Workers claim runs that can go on (submitted, decided, orphaned) and drive each to its end;
`claim_next` gives each run to one worker only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentsm import AgentBuilder, HumanInputRequired
from eventstore import EventStore, NewEvent, StoreError
from replay import decide
from replay.cli.worker import submit_command, worker_command
from replay.worker import Worker

from .stores import connect
from .worker_agent import make_agent

pytestmark = pytest.mark.usefixtures("ledger")


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.txt"
    path.touch()
    monkeypatch.setenv("AGENTSM_TEST_LEDGER", str(path))
    return path


def ev(kind: str = "A") -> NewEvent:
    return NewEvent(kind, "{}", "{}", time.time())


def finished(store: EventStore, run_id: str) -> int:
    """How many closing facts the run recorded."""
    return sum(e.kind == "RunFinished" for e in store.read(run_id))


def until(condition: object, what: str, seconds: float = 60) -> None:
    """Wait for `condition()` (a bound on the wait, not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def test_claim_next_takes_ready_then_queued_runs_and_each_once(log_url: str) -> None:
    first, second = connect(log_url), connect(log_url)
    assert first.claim_next() is None  # an empty log has nothing to go on with
    for run_id, status in [("q1", "queued"), ("d1", "done"), ("r1", "ready"), ("w1", "waiting")]:
        first.create_run(run_id, "task", events=[ev()], status=status)
    claimed = first.claim_next()  # a human answered r1: it goes before the queue
    assert claimed is not None and (claimed.run_id, claimed.status) == ("r1", "ready")
    assert claimed.driver is not None and claimed.lease_until is not None
    taken = second.claim_next()  # r1 is held: the next one
    assert taken is not None and taken.run_id == "q1"
    assert second.claim_next() is None and first.claim_next() is None  # done, waiting: never
    second.release("q1")
    again = first.claim_next(kinds=("ready", "queued"))
    assert again is not None and again.run_id == "q1"  # released without going on: claimable
    with pytest.raises(StoreError, match="'lost'.*the kinds are 'queued', 'ready', 'orphaned'"):
        first.claim_next(kinds=("lost",))


def test_a_running_run_is_orphaned_once_its_lease_runs_out_or_it_is_let_go(log_url: str) -> None:
    dead = connect(log_url, lease=0.5)
    dead.create_run("o1", "task", events=[ev()], status="running", claim=True)
    live = connect(log_url)
    live.create_run("gone", "task", events=[ev()], status="running", claim=True)
    assert live.claim_next() is None  # both are driven, under live leases
    live.release("gone")  # let go unfinished (a store error stopped it): nothing strands it
    assert live.run("gone").shown_status == "interrupted"
    taken = live.claim_next(kinds=("queued", "ready"))
    assert taken is None  # it is no queued run, but an orphan, which a worker takes at once:
    taken = live.claim_next(kinds=("orphaned",))
    assert taken is not None and taken.run_id == "gone"
    assert live.claim_next() is None  # o1's lease is still renewed
    dead.close()  # its lease is no longer renewed: the driver is as good as dead
    until(lambda: live.claim_next(kinds=("orphaned",)) is not None, "the lease to run out")
    record = live.run("o1")
    assert record.driver is not None and record.status == "running"
    with pytest.raises(StoreError, match="has not claimed it"):
        connect(log_url).append("o1", 1, [ev()])  # nobody else writes to it now
    assert live.append("o1", 1, [ev("B")]) == 2
    assert live.claim_next() is None


def test_workers_racing_for_runs_never_take_one_twice(log_url: str) -> None:
    setup = connect(log_url)
    ids = [f"run{i}" for i in range(40)]
    for run_id in ids:
        setup.create_run(run_id, "task", events=[ev()], status="queued")
    taken: list[list[str]] = [[] for _ in range(4)]

    def take(n: int) -> None:
        store = connect(log_url)
        while (record := store.claim_next()) is not None:
            taken[n].append(record.run_id)

    threads = [threading.Thread(target=take, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(sum(taken, [])) == sorted(ids)


def test_wait_for_append_wakes_when_another_store_records(log_url: str) -> None:
    writer, watcher = connect(log_url), connect(log_url)
    writer.create_run("r", "task", events=[ev()], status="running")
    writer.claim("r")
    watcher.wait_for_append(0)  # from here on, every commit counts
    assert watcher.wait_for_append(0.05) is False  # nothing was written meanwhile
    appended = threading.Event()

    def append() -> None:
        writer.append("r", 1, [ev("B")])
        appended.set()

    thread = threading.Thread(target=append)
    thread.start()
    until(lambda: watcher.wait_for_append(0.5), "the append to wake the watcher")
    thread.join(timeout=60)
    assert appended.is_set() and [e.kind for e in watcher.read("r", after=1)] == ["B"]


def test_a_worker_runs_submitted_runs_to_their_end(log_url: str, ledger: Path) -> None:
    store = connect(log_url)
    ids = [make_agent(f"entry {n}").store(store).submit() for n in range(3)]
    assert [store.run(i).status for i in ids] == ["queued"] * 3
    assert [e.kind for e in store.read(ids[0])] == ["RunStarted"]  # defined, not started
    results = Worker(store, make_agent).drain()
    assert [(r.run_id, r.claimed, r.outcome) for r in results] == [
        (i, "queued", "done") for i in ids
    ]
    assert all(store.run(i).status == "done" and finished(store, i) == 1 for i in ids)
    assert sorted(line.split(" ", 1)[1] for line in ledger.read_text().splitlines()) == [
        "entry 0",
        "entry 1",
        "entry 2",
    ]
    assert all(store.run(i).driver is None for i in ids)  # each handed back


def test_a_worker_continues_a_run_once_its_human_decision_is_recorded(log_url: str) -> None:
    store = connect(log_url)
    engine = make_agent("approve me").require_approval("write").store(store).build()
    with pytest.raises(HumanInputRequired):
        engine.run()
    worker = Worker(store, lambda task: make_agent(task).require_approval("write"))
    assert worker.run_once() is None  # waiting for a human: nothing for a worker
    decide(store, engine.run_id, "approved")
    assert store.run(engine.run_id).status == "ready"
    result = worker.run_once()
    assert result is not None and (result.claimed, result.outcome) == ("ready", "done")
    assert result.detail == "Recorded: SUCCESS: 1 lines" and finished(store, engine.run_id) == 1


def test_a_run_whose_agent_cannot_be_built_is_set_aside(log_url: str) -> None:
    store = connect(log_url)
    broken = make_agent("broken").store(store).submit()
    fine = make_agent("fine").store(store).submit()

    def builder(task: str) -> AgentBuilder:
        if task == "broken":
            raise RuntimeError("no such agent here")
        return make_agent(task)

    results = Worker(store, builder).drain()  # the broken run does not hold the queue up
    assert [(r.run_id, r.outcome) for r in results] == [(broken, "stopped"), (fine, "done")]
    assert "RuntimeError: no such agent here" in results[0].detail
    assert store.run(broken).status == "stopped" and store.run(broken).driver is None


def test_submit_and_worker_commands(log_url: str, ledger: Path) -> None:
    runner = CliRunner()
    spec = f"{Path(__file__).parent / 'worker_agent.py'}:make_agent"
    submitted = runner.invoke(submit_command, ["first entry", "--builder", spec, "--db", log_url])
    assert submitted.exit_code == 0, submitted.output
    run_id = submitted.output.strip()
    worked = runner.invoke(worker_command, ["--builder", spec, "--db", log_url, "--once"])
    assert worked.exit_code == 0, worked.output
    assert worked.output.startswith(f"{run_id} (queued) -> done: Recorded: SUCCESS: 1 lines")
    assert connect(log_url).run(run_id).status == "done"
    bad = runner.invoke(worker_command, ["--builder", "nowhere:make", "--db", log_url])
    assert bad.exit_code == 2 and "cannot import 'nowhere'" in bad.output


def test_a_worker_process_goes_on_until_sigterm(log_url: str, ledger: Path) -> None:
    store = connect(log_url)
    first = make_agent("first").store(store).submit()
    root = Path(__file__).resolve().parent.parent
    worker = subprocess.Popen(
        [sys.executable, "-m", "replay.cli.worker", "--builder", "tests.worker_agent:make_agent"]
        + ["--db", log_url, "--poll", "0.1"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        until(lambda: store.run(first).status == "done", "the first run")
        second = make_agent("second").store(store).submit()  # taken up while it waits
        until(lambda: store.run(second).status == "done", "the second run")
        worker.send_signal(signal.SIGTERM)
        out, _ = worker.communicate(timeout=60)
    finally:
        worker.kill()
        worker.wait(timeout=60)
    assert worker.returncode == 0
    assert [line.split()[0] for line in out.splitlines()] == [first, second]
