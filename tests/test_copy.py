"""`copy_runs` and `agentsm copy`: runs move between SQLite and PostgreSQL without losing a fact,
a hash, a parent link or a catalog entry, and a copied run replays identical where it lands."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentsm import LlmResponse
from agentsm.trace import Trace
from eventstore import EventStore, NewEvent, open_store
from replay import CopyRefused, copy_runs, replay_run
from replay.branching import branch_run
from replay.cli.copy import copy_command

from .backends import drop_schema, require_postgres, with_schema
from .scenarios import LONG, SCENARIOS


@pytest.fixture
def pg(request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """Makes URLs of new PostgreSQL logs (each in its own schema, dropped afterwards)."""
    server = require_postgres(request)
    schemas: list[str] = []

    def new() -> str:
        schemas.append(f"t_{uuid.uuid4().hex[:16]}")
        return with_schema(server, schemas[-1])

    yield new
    for schema in schemas:
        drop_schema(server, schema)


def record_with_branch(db: str) -> tuple[str, str]:
    """A recorded run and a branch of it, in the log at `db`."""
    engine = SCENARIOS["blacklist"]().store(db).build()
    engine.run()
    engine.store.close()
    with closing(open_store(db)) as store:
        refused = next(e for e in Trace.load(store, engine.run_id) if e.event == "ToolsRejected")
        branch = branch_run(
            store,
            engine.run_id,
            at=refused.seq,
            llm_response=LlmResponse.final_answer("Changed my mind: " + LONG),
        ).run_id
    return engine.run_id, branch


def same_runs(a: EventStore, b: EventStore, run_ids: list[str]) -> None:
    for run_id in run_ids:
        left, right = a.run(run_id), b.run(run_id)
        for field in (
            "task",
            "status",
            "created_at",
            "parent_id",
            "branch_seq",
            "info",
            "last_seq",
        ):
            assert getattr(left, field) == getattr(right, field), (run_id, field)
        assert a.read(run_id) == b.read(run_id)  # every fact, its envelope and hash
        assert a.verify(run_id).head == b.verify(run_id).head and b.verify(run_id).ok


def test_runs_go_from_sqlite_to_postgresql_and_back_losslessly(
    tmp_path: Path, pg: Callable[[], str]
) -> None:
    first = str(tmp_path / "runs.db")
    run_id, branch = record_with_branch(first)
    there, back = pg(), str(tmp_path / "back.db")
    with closing(open_store(first)) as src, closing(open_store(there)) as dst:
        report = copy_runs(src, dst, [branch[:8], run_id])  # a branch named before its parent
        assert report.copied == (run_id, branch) and report.present == ()
        same_runs(src, dst, [run_id, branch])
    assert replay_run(there, run_id, lambda task: SCENARIOS["blacklist"]()).identical
    assert replay_run(there, branch).identical
    with closing(open_store(there)) as src, closing(open_store(back)) as dst:
        copy_runs(src, dst)
    with closing(open_store(first)) as original, closing(open_store(back)) as returned:
        same_runs(original, returned, [run_id, branch])
        assert [r.run_id for r in returned.runs()] == [run_id, branch]


def test_a_copy_run_again_leaves_what_is_there_and_refuses_other_facts(
    tmp_path: Path, pg: Callable[[], str]
) -> None:
    source = str(tmp_path / "runs.db")
    run_id, branch = record_with_branch(source)
    dest = pg()
    with closing(open_store(source)) as src, closing(open_store(dest)) as dst:
        copy_runs(src, dst, [run_id])
        again = copy_runs(src, dst)
        assert again.copied == (branch,) and again.present == (run_id,)
        assert str(again) == "1 run copied, 1 already there"
        other = open_store(str(tmp_path / "other.db"))
        other.create_run(run_id, "another", events=[NewEvent("RunStarted", "{}", "{}", 1.0)])
        with pytest.raises(CopyRefused, match="other facts. Nothing was copied"):
            copy_runs(src, other)
        assert [r.run_id for r in other.runs()] == [run_id]
        other.close()


def test_the_catalog_summary_is_copied(pg: Callable[[], str]) -> None:
    engine = SCENARIOS["blacklist"]().build()
    engine.run()
    recorded = [
        NewEvent(e.kind, e.payload, json.dumps(e.meta), e.recorded_at, e.version)
        for e in engine.store.read(engine.run_id)
    ]
    summary = engine.store.run(engine.run_id).summary  # as its recorder wrote it
    assert summary.steps and summary.answer
    with closing(open_store(pg())) as src, closing(open_store(pg())) as dst:
        task = engine.definition.task
        src.create_run("r", task, events=recorded, status="done", summary=summary)
        copy_runs(src, dst)
        assert dst.run("r").summary == summary


def test_agentsm_copy_on_the_command_line(tmp_path: Path, pg: Callable[[], str]) -> None:
    source = str(tmp_path / "runs.db")
    run_id, branch = record_with_branch(source)
    dest = pg()
    runner = CliRunner()
    done = runner.invoke(copy_command, ["--to", dest], env={"AGENTSM_DB": source})
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [f"copied {run_id}", f"copied {branch}", "2 runs copied"]
    again = runner.invoke(copy_command, ["--from", source, "--to", dest, run_id[:6]])
    assert again.exit_code == 0 and f"already there {run_id}" in again.output
    missing = runner.invoke(copy_command, ["--from", source, "--to", dest, "nope"])
    assert missing.exit_code == 1 and "Unknown run id 'nope'" in missing.output
    absent = runner.invoke(copy_command, ["--from", str(tmp_path / "none.db"), "--to", dest])
    assert absent.exit_code == 1 and "No database at" in absent.output
    with closing(open_store(dest)) as store:
        assert store.verify(branch).ok and store.run(branch).parent_id == run_id
