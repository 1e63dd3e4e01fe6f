"""Live tail: facts of a run recorded by another thread or process come out in order, from
any seq, none missed and none repeated."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentsm import AgentBuilder, LlmResponse, MockLlmCaller, tool
from eventstore import EventStore
from replay.cli.tail import tail_command
from replay.tail import LiveFact, follow
from replay.worker import Worker

from .scenarios import LONG
from .stores import connect
from .worker_agent import make_agent

ROOT = Path(__file__).resolve().parent.parent


def gated_agent(gate: threading.Event, task: str = "Look it up") -> AgentBuilder:
    """An agent whose tool waits for `gate`: the test lets the run go on when it wants."""

    @tool(idempotent=True)
    def lookup(query: str) -> str:
        """Look something up once the test lets it."""
        assert gate.wait(timeout=120), "the test never opened the gate"
        return f"found {query}"

    llm = MockLlmCaller(
        [LlmResponse.tool_call("lookup", {"query": "x"}), LlmResponse.final_answer(LONG)]
    )
    return AgentBuilder(task).llm(llm).tool(lookup)


def seqs(store: EventStore, run_id: str) -> list[tuple[str, int, str]]:
    return [(run_id, e.seq, e.kind) for e in store.read(run_id)]


def collect(
    store: EventStore, run_id: str | None, until: int | None = None, **kw: object
) -> list[LiveFact]:
    async def go() -> list[LiveFact]:
        got: list[LiveFact] = []
        async for fact in follow(store, run_id, poll=0.2, **kw):  # type: ignore[arg-type]
            got.append(fact)
            if until is not None and len(got) >= until:
                break
        return got

    return asyncio.run(go())


def test_follow_gives_every_fact_of_a_run_recorded_by_another_thread_once(log_url: str) -> None:
    writer, reader = connect(log_url), connect(log_url)
    gate = threading.Event()
    engine = gated_agent(gate).store(writer).build()
    thread = threading.Thread(target=engine.run)
    thread.start()
    try:
        seen: list[LiveFact] = []

        async def go() -> None:
            while True:  # the run exists once its first facts are committed
                if any(r.run_id == engine.run_id for r in reader.runs()):
                    break
                await asyncio.to_thread(reader.wait_for_append, 0.2)
            async for fact in follow(reader, engine.run_id, poll=0.2):
                seen.append(fact)
                if fact.entry.event == "ToolCallStarted":
                    gate.set()  # the rest is recorded while the tail waits

        asyncio.run(go())
    finally:
        gate.set()
        thread.join(timeout=120)
    assert [(f.run_id, f.entry.seq, f.entry.event) for f in seen] == seqs(reader, engine.run_id)
    assert seen[-1].entry.event == "RunFinished" and reader.run(engine.run_id).status == "done"
    later = collect(reader, engine.run_id[:6], after_seq=3)  # from any seq, by a prefix
    assert [f.entry.seq for f in later] == list(range(4, len(seen) + 1))


def test_follow_all_gives_runs_recorded_by_another_process(log_url: str, tmp_path: Path) -> None:
    store = connect(log_url)
    old = make_agent("old entry").store(store).submit()  # before the tail starts
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    env = {**os.environ, "AGENTSM_TEST_LEDGER": str(ledger), "PYTHONPATH": str(ROOT)}
    script = (
        "import sys\nfrom tests.worker_agent import make_agent\nfrom tests.stores import connect\n"
        "from replay.worker import Worker\nstore = connect(sys.argv[1])\n"
        "ids = [make_agent(f'entry {n}').store(store).submit() for n in range(3)]\n"
        "Worker(store, make_agent).drain()\n"
    )

    async def go() -> list[LiveFact]:
        got: list[LiveFact] = []
        ended: set[str] = set()
        facts = follow(store, poll=0.2, from_start=False)
        writer = subprocess.Popen([sys.executable, "-c", script, log_url], cwd=ROOT, env=env)
        try:
            async for fact in facts:
                got.append(fact)
                ended |= {fact.run_id} if fact.entry.event == "RunFinished" else set()
                if len(ended) == 4:  # the three new runs and the old one, all run by it
                    break
            assert writer.wait(timeout=120) == 0
        finally:
            writer.kill()
            writer.wait(timeout=60)
        return got

    got = asyncio.run(go())
    runs = {f.run_id for f in got}
    assert old in runs and len(runs) == 4
    for run_id in runs:
        mine = [(f.run_id, f.entry.seq, f.entry.event) for f in got if f.run_id == run_id]
        expected = seqs(store, run_id)
        assert mine == (expected[1:] if run_id == old else expected)  # old: only what is new


def test_tail_command_prints_a_line_per_fact_and_says_how_the_run_ended(log_url: str) -> None:
    store = connect(log_url)
    gate = threading.Event()
    gate.set()
    engine = gated_agent(gate).store(store).build()
    engine.run()
    failed = AgentBuilder("Fail").llm(MockLlmCaller([])).store(store).build()
    with pytest.raises(Exception, match="no more programmed responses"):
        failed.run()
    runner = CliRunner()
    done = runner.invoke(tail_command, [engine.run_id, "--db", log_url])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert len(lines) == engine.seq and lines[0].split()[:4] == ["1", "0", "Idle", "RunStarted"]
    assert lines[-1].split()[3] == "RunFinished"
    bad = runner.invoke(tail_command, [failed.run_id, "--db", log_url, "--after", "2"])
    assert bad.exit_code == 1 and bad.output.splitlines()[0].split()[0] == "3"
    some = runner.invoke(tail_command, ["--all", "--db", log_url, "-n", "3", "--json"])
    assert some.exit_code == 0 and len(some.output.splitlines()) == 3
    assert runner.invoke(tail_command, ["--db", log_url]).exit_code == 2  # RUN or --all
    unknown = runner.invoke(tail_command, ["nope", "--db", log_url])
    assert unknown.exit_code == 2 and "nope" in unknown.output


def test_tail_command_in_another_process_follows_a_run_to_its_end(
    log_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = connect(log_url)
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    monkeypatch.setenv("AGENTSM_TEST_LEDGER", str(ledger))
    run_id = make_agent("entry").store(store).submit()
    tail = subprocess.Popen(
        [sys.executable, "-m", "replay.cli.tail", run_id, "--db", log_url, "--poll", "0.1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert tail.stdout is not None
        first = tail.stdout.readline()  # the tail is up: it printed the queued run's first fact
        assert first.split()[3] == "RunStarted"
        [result] = Worker(store, make_agent).drain()
        rest, _ = tail.communicate(timeout=120)
    finally:
        tail.kill()
        tail.wait(timeout=60)
    assert result.outcome == "done" and tail.returncode == 0
    printed = [line.split()[0] for line in (first + rest).splitlines()]
    assert printed == [str(n) for n in range(1, store.run(run_id).last_seq + 1)]
