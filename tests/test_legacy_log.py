"""A log written by agentsm 0.1.0 (tests/fixtures/legacy) must stay readable: every run folds to
the memory that release computed and replays identical with today's code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentsm.memory import fold_with_state
from eventstore import SQLiteEventStore
from replay import Recording, replay_run
from replay.cli import main

LEGACY = Path(__file__).parent / "fixtures" / "legacy"
EXPECTED: dict[str, dict[str, Any]] = json.loads((LEGACY / "expected.json").read_text())


@pytest.fixture
def legacy_db(tmp_path: Path) -> Path:
    """A copy of the old log: opening it may migrate it, and the fixture must stay as written."""
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY / "legacy-0.1.0.db", db)
    return db


def test_the_fixture_holds_the_runs_it_was_made_with(legacy_db: Path) -> None:
    with SQLiteEventStore(legacy_db, create=False) as store:
        assert [r.run_id for r in store.runs()] == list(EXPECTED)


@pytest.mark.parametrize("run_id", list(EXPECTED))
def test_a_legacy_run_folds_as_it_did_when_recorded(legacy_db: Path, run_id: str) -> None:
    expected = EXPECTED[run_id]
    with SQLiteEventStore(legacy_db, create=False) as store:
        record = store.run(run_id)
        entries = Recording.load(store, run_id).entries
    memory, state = fold_with_state(e.fact for e in entries)
    assert {
        "status": record.status,
        "facts": len(entries),
        "state": str(state),
        "step": memory.step,
        "final_answer": memory.final_answer,
        "error": memory.error,
        "tokens": memory.total_usage.total_tokens,
        "history": [[h.tool.name, h.observation, h.success] for h in memory.history],
        "pending_approval": sorted(memory.pending_approval),
    } == expected


@pytest.mark.parametrize("run_id", list(EXPECTED))
def test_a_legacy_run_replays_identical(legacy_db: Path, run_id: str) -> None:
    with SQLiteEventStore(legacy_db, create=False) as store:
        report = replay_run(store, run_id)
    assert report.identical, str(report)
    assert report.compared == EXPECTED[run_id]["facts"]


def test_the_cli_lists_and_replays_every_legacy_run(
    legacy_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", str(legacy_db), "runs"]) == 0
    listed = capsys.readouterr().out
    assert all(run_id in listed for run_id in EXPECTED)
    assert main(["--db", str(legacy_db), "replay", "--all"]) == 0
    assert f"{len(EXPECTED)} runs replayed: {len(EXPECTED)} identical" in capsys.readouterr().out
