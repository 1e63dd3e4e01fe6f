"""Logs users have in format 1, as agentsm 0.3.0 writes them (tests/fixtures/format1), must stay
readable: every run reads and folds to what that release computed, its hash chain verifies, it
replays identical with today's code, a thread replays turn by turn, an export imports with every
hash kept, and the command line reads each run, whatever format logs are written in later."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder
from agentsm import facts as f
from agentsm.memory import fold_with_state
from eventstore import SQLiteEventStore
from replay import Recording, export_run, import_runs, replay_run, replay_thread
from replay.cli import main

from .fixtures.format1 import agents

FORMAT1 = Path(__file__).parent / "fixtures" / "format1"
LOG = FORMAT1 / "format1-0.3.0.db"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FORMAT1 / "expected.json").read_text())
THREADS = {"chat": ["chat-1", "chat-2", "chat-3"], "chat-kelvin": ["chat-1", "chat-kelvin-2"]}

BUILDERS: dict[str, Callable[[str], AgentBuilder]] = {
    "findings": agents.findings_agent,  # a custom state and a custom fact
    "redacted": agents.redacted_agent,  # redaction hooks
    "delegating": agents.parent_agent,  # a sub-agent
    "delegating-1-0": agents.parent_agent,  # the sub-agent's run, replayed with its parent's agent
}
"""The runs whose agent has code a recorded definition cannot stand for: replayed with it."""


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The format-1 log brought to log format 2 by `agentsm migrate` (once per module)."""
    db = tmp_path_factory.mktemp("migrated") / "format2.db"
    shutil.copy(LOG, db)
    backup = db.parent / "before.db"
    assert main(["--db", str(db), "migrate", "--backup", str(backup)]) == 0
    with SQLiteEventStore(backup, read_only=True) as before:  # the copy made first: as it was
        assert before.log_format == 1
        assert [(r.run_id, before.verify(r.run_id).head) for r in before.runs()] == [
            (run_id, expected["head"]) for run_id, expected in EXPECTED.items()
        ]
    with SQLiteEventStore(db, create=False) as store:
        assert store.log_format == 2
    return db


@pytest.fixture(params=["as recorded", "migrated to format 2"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A copy of the format-1 log, as recorded or migrated (opening it must not migrate it to
    format 2 unasked, and the fixture stays as written)."""
    db = tmp_path / "format1.db"
    shutil.copy(LOG if request.param == "as recorded" else request.getfixturevalue("migrated"), db)
    if request.param == "as recorded":
        with SQLiteEventStore(db) as store:  # opened to write, as a user's tool would
            assert store.log_format == 1
    return db


@pytest.fixture(scope="module", autouse=True)
def registered() -> None:
    """The custom fact of the `findings` run, registered as its agent registers it, so that
    folds see it as the recording release did."""
    agents.findings_agent("registers FindingLogged")


def summary(store: SQLiteEventStore, run_id: str) -> dict[str, Any]:
    """What a run folds to and how its log reads (as make_format1_db.py computed it)."""
    record = store.run(run_id)
    entries = Recording.load(store, run_id).entries
    memory, state = fold_with_state(e.fact for e in entries)
    events = store.read(run_id)
    return {
        "status": record.status,
        "parent_id": record.parent_id,
        "branch_seq": record.branch_seq,
        "facts": len(entries),
        "kinds": [f"{e.event}@{e.state}/{e.step}" for e in entries],
        "head": events[-1].hash,
        "state": str(state),
        "step": memory.step,
        "final_answer": memory.final_answer,
        "error": memory.error,
        "tokens": memory.total_usage.total_tokens,
        "history": [[h.tool.name, h.observation, h.success] for h in memory.history],
        "pending_approval": sorted(memory.pending_approval),
        "parts": json.loads(json.dumps(dict(memory.parts), default=list)),
    }


def cli(db: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The output of `agentsm --db DB ARGS...`, which must succeed."""
    code = main(["--db", str(db), *args])
    out, err = capsys.readouterr()
    assert code == 0, f"agentsm {' '.join(args)} exited {code}: {err}"
    return out


def test_the_fixture_is_one_small_file_holding_the_runs_it_was_made_with(log: Path) -> None:
    assert LOG.stat().st_size < 1_000_000
    assert not list(FORMAT1.glob(LOG.name + "-*")), "the fixture was opened in place: restore it"
    with SQLiteEventStore(log, create=False) as store:
        assert [r.run_id for r in store.runs()] == list(EXPECTED)


def test_the_corpus_has_every_feature_it_claims(log: Path) -> None:
    with SQLiteEventStore(log, create=False) as store:
        recordings = {r: Recording.load(store, r) for r in EXPECTED}
        blobs = store.blobs(["sha256:" + hashlib.sha256(agents.RED_PNG).hexdigest()])
    facts = {r: [e.fact for e in recording.entries] for r, recording in recordings.items()}
    started = {r: recording.definition for r, recording in recordings.items()}
    assert {
        "RunBranched",
        "HumanDecided",
        "Steered",
        "StopRequested",
        "ContextCompacted",
        "HistoryCompressed",
        "LlmFailed",
        "FindingLogged",
        "RunFailed",
        "AnswerRejected",
        "ConfidenceLow",
    } <= {x.kind for run in facts.values() for x in run}
    verdicts = {
        d.verdict
        for run in facts.values()
        for x in run
        if isinstance(x, f.HumanDecided)
        for d in x.decisions
    }
    assert verdicts == {"approved", "modified", "rejected", "answered"}
    assert started["delegating-1-0"].parent_call is not None
    assert [s.name for s in started["mcp"].mcp_servers or ()] == ["calc"]
    assert started["image"].images and len(blobs) == 1  # the task's image, in the blobs table
    assert started["question"].questions == ("ask_human",)
    assert all(started[t].thread is not None for t in THREADS["chat"])
    assert any(x.response.reasoning for x in facts["reasoning"] if isinstance(x, f.LlmResponded))
    assert facts["crashed"][-1].kind == "ToolCallStarted"  # the process died inside the tool
    assert EXPECTED["tools-branch-branch"]["parent_id"] == "tools-branch"
    assert {r["status"] for r in EXPECTED.values()} == {
        "done",
        "failed",
        "waiting",
        "running",
        "stopped",
        "queued",
    }


@pytest.mark.parametrize("run_id", list(EXPECTED))
def test_a_format1_run_folds_as_it_did_when_recorded(log: Path, run_id: str) -> None:
    with SQLiteEventStore(log, create=False) as store:
        assert summary(store, run_id) == EXPECTED[run_id]


@pytest.mark.parametrize("run_id", list(EXPECTED))
def test_a_format1_run_verifies(log: Path, run_id: str) -> None:
    with SQLiteEventStore(log, create=False) as store:
        report = store.verify(run_id)
    assert report.ok, str(report)
    assert (report.events, report.unhashed) == (EXPECTED[run_id]["facts"], 0)
    assert report.head == EXPECTED[run_id]["head"]


@pytest.mark.parametrize("run_id", list(EXPECTED))
def test_a_format1_run_replays_identical(log: Path, run_id: str) -> None:
    report = replay_run(log, run_id, BUILDERS.get(run_id))
    assert report.identical, str(report)
    assert report.compared == EXPECTED[run_id]["facts"]


def test_a_sub_agent_run_replays_with_its_child(log: Path) -> None:
    report = replay_run(log, "delegating", agents.parent_agent, children=True)
    assert report.identical, str(report)
    assert [(c.run_id, c.identical) for c in report.children] == [("delegating-1-0", True)]


def test_the_mcp_run_replays_with_its_server_gone(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no tests/mcp_server.py here, and no python on the PATH
    monkeypatch.setenv("PATH", str(tmp_path))

    def calc(task: str) -> AgentBuilder:  # the agent as recorded: the server it names is gone
        return AgentBuilder(task).mcp_server_stdio("python", ["tests/mcp_server.py"], name="calc")

    assert replay_run(log, "mcp").identical  # the recorded definition
    report = replay_run(log, "mcp", calc)  # the user's builder: the recorded tools stand in
    assert report.identical, str(report)


@pytest.mark.parametrize("thread_id", list(THREADS))
def test_every_turn_of_a_format1_thread_replays_identical(
    log: Path, thread_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    replayed = replay_thread(log, thread_id)
    assert replayed.identical, str(replayed)
    assert [r.run_id for r in replayed.reports] == THREADS[thread_id]
    turns = len(THREADS[thread_id])
    out = cli(log, capsys, "replay", "--thread", thread_id)
    assert f"thread {thread_id}: {turns} turns replayed, {turns} identical" in out


def test_an_export_of_every_run_imports_with_its_hashes(log: Path, tmp_path: Path) -> None:
    with SQLiteEventStore(log, create=False) as store:
        lines = [line for run_id in EXPECTED for line in export_run(store, run_id)]
        before = {r: [(e.seq, e.kind, e.hash) for e in store.read(r)] for r in EXPECTED}
    with SQLiteEventStore(tmp_path / "imported.db") as copy:
        assert import_runs(copy, lines) == list(EXPECTED)
        for run_id in EXPECTED:
            assert [(e.seq, e.kind, e.hash) for e in copy.read(run_id)] == before[run_id]
            assert copy.verify(run_id).ok
            assert summary(copy, run_id) == EXPECTED[run_id]
    assert replay_run(tmp_path / "imported.db", "image").identical  # the blobs came along


def test_the_cli_reads_every_format1_run(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listed = cli(log, capsys, "runs", "-n", "100")
    assert all(run_id in listed for run_id in EXPECTED)
    verified = cli(log, capsys, "verify", "--all")
    assert f"{len(EXPECTED)} runs verified: {len(EXPECTED)} intact, 0 broken" in verified
    for run_id, expected in EXPECTED.items():
        shown = cli(log, capsys, "show", run_id)
        assert shown.count("\n") > expected["facts"], shown  # a line per fact, and a heading
        remembered = cli(log, capsys, "memory", run_id)
        assert f"run {run_id} at seq {expected['facts']}: state {expected['state']}" in remembered
        if expected["final_answer"] is not None:
            assert expected["final_answer"][:40] in remembered
    exported = cli(log, capsys, "export", "image")
    (log.parent / "image.jsonl").write_text(exported)
    other = log.parent / "other.db"
    cli(other, capsys, "import", str(log.parent / "image.jsonl"))
    assert "intact, 18 facts chained" in cli(other, capsys, "verify", "image")
