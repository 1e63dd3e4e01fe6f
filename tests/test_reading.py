"""Reading a run checks its hash chain first (eventstore.reading): a log edited, reordered or
cut after it was written is refused with `LogTampered` by every reader (show, memory, replay,
branch, export, the viewer), on every backend; an untouched or legacy log reads as before."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder, AgentMemory, LlmResponse, MockLlmCaller, Trace, tool
from eventstore import EventStore, LogTampered, SQLiteEventStore, StoreError
from eventstore.reading import ChainedReader, read_checked
from replay import ExportRefused, Recording, branch_run, export_run, memory_at, replay_run
from replay.cli import main

from .backends import Backend

pytestmark = pytest.mark.usefixtures("format1_logs")  # these tests edit format 1's rows

LONG = "The answer, which is long enough to be accepted."
FORGED = "A forged answer, which is long enough to pass."
LEGACY = Path(__file__).parent / "fixtures" / "legacy" / "legacy-0.1.0.db"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def record(store: EventStore | Path, run_id: str = "r") -> None:
    script = [LlmResponse.tool_call("lookup", {"key": "a"}), LlmResponse.final_answer(LONG)]
    builder = AgentBuilder("task").llm(MockLlmCaller(script)).tool(lookup)
    builder.store(store).run_id(run_id).build().run()


def tamper(db: Path, *statements: str) -> None:
    """Edit the log as someone with write access would: triggers dropped first."""
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        conn.execute(f"DROP TRIGGER {name}")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


FORGE = f"UPDATE events SET payload = replace(payload, '{LONG}', '{FORGED}') WHERE run_id = 'r'"
SWAP = (  # facts 5 and 6 change places
    "UPDATE events SET seq = -1 WHERE run_id = 'r' AND seq = 5",
    "UPDATE events SET seq = 5 WHERE run_id = 'r' AND seq = 6",
    "UPDATE events SET seq = 6 WHERE run_id = 'r' AND seq = -1",
)
EDITS: dict[str, tuple[tuple[str, ...], int, str]] = {
    "edited": ((FORGE,), 15, "seq 15 (LlmResponded) does not match its hash"),
    "reordered": (SWAP, 5, "seq 5 (ToolCallsPlanned) does not match its hash"),
    "deleted": (("DELETE FROM events WHERE run_id = 'r' AND seq = 6",), 6, "seq 6 is missing"),
    "cut": (
        ("DELETE FROM events WHERE run_id = 'r' AND seq = 18",),
        18,
        "seq 18 is missing (the catalog says the run has 18 facts)",
    ),
    "unhashed": (
        ("UPDATE events SET hash = NULL WHERE run_id = 'r'",),
        1,
        "seq 1 (RunStarted) has lost its hash",
    ),
}
SAID = "Run r's log was changed after it was recorded: "


@pytest.fixture(params=list(EDITS))
def tampered(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, int, str]:
    """A log with a good run and run r changed after it was recorded, where and how."""
    db = tmp_path / "log.db"
    record(db, "good")
    record(db)
    statements, seq, problem = EDITS[request.param]
    tamper(db, *statements)
    return db, seq, problem


COMMANDS = {
    "show": ["show", "r"],
    "show --json": ["show", "r", "--json"],
    "memory": ["memory", "r"],
    "replay": ["replay", "r"],
    "branch": ["branch", "r", "--at", "3", "--answer", LONG],
    "export": ["export", "r"],
    "timeline": ["timeline", "r", "--out", "t.svg"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_refuses_a_changed_log_in_one_line(
    tampered: tuple[Path, int, str],
    command: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db, _, problem = tampered
    monkeypatch.chdir(db.parent)
    assert main(["--db", str(db), *COMMANDS[command]]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert f"agentsm: {SAID}{problem}" in captured.err
    assert "agentsm verify r" in captured.err
    before = len(SQLiteEventStore(db, read_only=True).runs())
    assert before == 2  # nothing was branched off the changed run


@pytest.mark.parametrize("command", list(COMMANDS))
def test_each_command_reads_an_untouched_log_as_before(
    tmp_path: Path,
    command: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "log.db"
    record(db)
    record(db, "other")
    tamper(db, FORGE.replace("'r'", "'other'"))  # another run's change is not this one's
    monkeypatch.chdir(tmp_path)
    assert main(["--db", str(db), *COMMANDS[command]]) == 0
    assert "changed after" not in capsys.readouterr().err


def test_the_library_readers_raise_log_tampered_naming_the_place(
    tampered: tuple[Path, int, str],
) -> None:
    db, seq, problem = tampered
    store = SQLiteEventStore(db, read_only=True)
    readers: dict[str, Any] = {
        "Recording.load": lambda: Recording.load(store, "r"),
        "Trace.load": lambda: Trace.load(store, "r"),
        "AgentMemory.rebuild": lambda: AgentMemory.rebuild(store, "r"),
        "memory_at": lambda: memory_at(store, "r", 18),
        "replay_run": lambda: replay_run(db, "r"),
        "branch_run": lambda: branch_run(db, "r", 3, llm_response=LlmResponse.final_answer(LONG)),
        "export_run": lambda: list(export_run(store, "r")),
    }
    for name, read in readers.items():
        with pytest.raises(LogTampered) as caught:
            read()
        error = caught.value
        assert isinstance(error, StoreError), name
        assert (error.run_id, error.seq) == ("r", seq), name
        assert str(error).startswith(SAID + problem), name
        assert "agentsm verify r" in str(error), name
    assert Recording.load(store, "good").finished  # the other run reads as ever
    assert len(SQLiteEventStore(db, read_only=True).runs()) == 2


def test_an_export_refused_is_a_log_tampered_with_a_repr(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    record(db)
    tamper(db, FORGE)
    with pytest.raises(ExportRefused) as caught:
        list(export_run(SQLiteEventStore(db), "r"))
    assert isinstance(caught.value, LogTampered)
    assert "nothing was exported" in str(caught.value)
    assert repr(caught.value) == "ExportRefused(run_id='r', seq=15, kind='LlmResponded')"
    with pytest.raises(LogTampered) as read:
        Recording.load(SQLiteEventStore(db), "r")
    assert repr(read.value) == "LogTampered(run_id='r', seq=15, kind='LlmResponded')"


def test_a_prefix_of_a_run_reads_up_to_where_it_was_changed(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    record(db)
    tamper(db, FORGE)
    store = SQLiteEventStore(db, read_only=True)
    assert len(Recording.load(store, "r", upto=14).entries) == 14  # all recorded as written
    with pytest.raises(LogTampered, match="seq 15"):
        Recording.load(store, "r", upto=15)


def test_time_travel_from_a_checkpoint_goes_on_checking(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    record(db)
    store = SQLiteEventStore(db)
    assert memory_at(store, "r", 18)[0].final_answer == LONG  # checkpoints kept at 10
    tamper(db, FORGE)
    with pytest.raises(LogTampered, match="seq 15"):
        memory_at(SQLiteEventStore(db), "r", 18)


def test_the_viewer_answers_409_with_the_message(tampered: tuple[Path, int, str]) -> None:
    pytest.importorskip("fastapi", reason="the web viewer needs the ui extra")
    from fastapi.testclient import TestClient

    from replay.ui import Viewer, create_app

    db, _, problem = tampered
    api = TestClient(create_app(Viewer(str(db))), base_url="http://127.0.0.1")
    assert api.get("/api/runs/good").status_code == 200
    for path in ("/api/runs/r", "/api/runs/r/timeline", "/api/runs/r/memory?seq=18"):
        answer = api.get(path)
        assert answer.status_code == 409, path
        assert answer.json()["detail"].startswith(SAID + problem), path


def test_a_legacy_log_reads_without_hashes(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY, db)
    store = SQLiteEventStore(db, read_only=True)  # not migrated: no hash column at all
    for run in store.runs():
        assert Recording.load(store, run.run_id).entries
    migrated = SQLiteEventStore(db)  # migrated: every event recorded before hashes
    for run in migrated.runs():
        assert Trace.load(migrated, run.run_id).facts()
        AgentMemory.rebuild(migrated, run.run_id)


class Chained(SQLiteEventStore):
    """A store that reads bare rows with their hashes (what `ChainedReader` asks)."""

    def read_chained(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> list[tuple[int, str, int, str, str, float, str | None]]:
        return [
            (e.seq, e.kind, e.version, e.payload, json.dumps(e.meta), e.recorded_at, e.hash)
            for e in self.read(run_id, after=after, upto=upto)
        ]


def test_a_store_that_reads_rows_with_hashes_is_checked_through_them(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    record(db)
    store = Chained(db)
    assert isinstance(store, ChainedReader)
    rows = list(read_checked(store, "r"))
    assert [row[0] for row in rows] == list(range(1, 19))
    assert isinstance(rows[0][4], str)  # the meta as text, as the store gave it
    assert Recording.load(store, "r").finished
    store.close()
    tamper(db, *SWAP)
    with pytest.raises(LogTampered, match="seq 5"):
        Recording.load(Chained(db), "r")


def test_every_backend_refuses_a_changed_log(backend: Backend) -> None:
    record(backend.open())
    assert Recording.load(backend.open(), "r").finished
    if backend.name == "postgresql":
        backend.execute("DROP TRIGGER events_refuse_update ON events")
    else:
        backend.execute("DROP TRIGGER events_refuse_update")
    backend.execute(
        "UPDATE events SET payload = replace(payload, ?, ?) WHERE run_id = 'r'", (LONG, FORGED)
    )
    with pytest.raises(LogTampered, match=r"seq 15 \(LlmResponded\) does not match its hash"):
        Recording.load(backend.open(), "r")
    if backend.name == "postgresql":
        return  # its hashes are NOT NULL
    backend.execute("UPDATE events SET hash = NULL WHERE run_id = 'r'")
    with pytest.raises(LogTampered, match=r"seq 1 \(RunStarted\) has lost its hash"):
        AgentMemory.rebuild(backend.open(), "r")
