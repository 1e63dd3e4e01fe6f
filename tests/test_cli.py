"""The `agentsm` command, run as a user runs it, on a real database file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentsm import AgentMemory, State
from eventstore import SQLiteEventStore


def agentsm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replay", *args], capture_output=True, text=True, cwd=cwd
    )


def test_demo_records_prints_and_rebuilds(tmp_path: Path) -> None:
    result = agentsm("demo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Answer: Paris is the capital of France." in out
    assert "Planning --ToolBlacklisted--> Planning" in out
    assert "identical to the engine memory" in out
    db = tmp_path / "agentsm-demo.db"
    store = SQLiteEventStore(db, create=False)
    (run,) = store.runs()
    assert run.status == "done"
    memory, state = AgentMemory.rebuild(store, run.run_id)
    assert state == State.Done and memory.step == 5 and len(memory.history) == 5
    again = agentsm("demo", "--db", str(db), cwd=tmp_path)
    assert again.returncode == 0
    assert len(SQLiteEventStore(db).runs()) == 2


def test_demo_refuses_a_database_that_is_not_a_log(tmp_path: Path) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("plain text, not sqlite " * 50)
    result = agentsm("demo", "--db", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert "not a usable SQLite database" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_has_examples(tmp_path: Path) -> None:
    result = agentsm("demo", "--help", cwd=tmp_path)
    assert result.returncode == 0 and "example: agentsm demo" in result.stdout
