"""Tamper evidence: every fact carries a hash chained to its run's previous fact; `agentsm verify`
finds the first broken link, edits made with the append-only triggers dropped included."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agentsm import AgentBuilder, LlmResponse, MockLlmCaller, tool
from eventstore import LogTampered, NewEvent, SQLiteEventStore, StoreError
from eventstore.chain import GENESIS, V2, link, link_v1
from replay import (
    ExportRefused,
    ImportRefused,
    branch_run,
    decide,
    export_run,
    import_runs,
    replay_run,
)
from replay.cli import main

pytestmark = pytest.mark.usefixtures("format1_logs")  # these tests edit format 1's rows

LONG = "The answer, which is long enough to be accepted."
FORGED = "A forged answer, which is long enough to pass."
LEGACY = Path(__file__).parent / "fixtures" / "legacy" / "legacy-0.1.0.db"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def record(db: Path, run_id: str = "r") -> None:
    script = [LlmResponse.tool_call("lookup", {"key": "a"}), LlmResponse.final_answer(LONG)]
    builder = AgentBuilder("task").llm(MockLlmCaller(script)).tool(lookup)
    builder.store(SQLiteEventStore(db)).run_id(run_id).build().run()


def tamper(db: Path, *statements: str) -> None:
    """Edit the log as someone with write access would: triggers dropped first."""
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        conn.execute(f"DROP TRIGGER {name}")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


def test_every_fact_is_chained_to_the_one_before(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    record(db)
    store = SQLiteEventStore(db)
    events = store.read("r")
    previous = GENESIS
    for e in events:
        assert e.hash == link(
            previous, "r", e.seq, e.kind, e.version, e.payload, e.meta, e.recorded_at
        )
        previous = e.hash
    report = store.verify("r")
    assert report.ok and report.unhashed == 0 and report.head == events[-1].hash


def test_an_answer_forged_in_every_fact_is_found_at_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    record(db, "good")
    record(db, "r")
    tamper(
        db,
        f"UPDATE events SET payload = replace(payload, '{LONG}', '{FORGED}') WHERE run_id = 'r'",
    )
    with pytest.raises(LogTampered, match=r"seq 15 \(LlmResponded\) does not match its hash"):
        replay_run(db, "r")  # the replay would be identical: the check says what happened
    report = SQLiteEventStore(db, read_only=True).verify("r")
    assert report.broken is not None
    assert (report.broken.seq, report.broken.kind) == (15, "LlmResponded")
    assert main(["--db", str(db), "verify", "r"]) == 1
    assert "run r: broken at seq 15 (LlmResponded)" in capsys.readouterr().out
    assert main(["--db", str(db), "verify", "--all"]) == 1
    out = capsys.readouterr().out
    assert "run good: intact" in out and "2 runs verified: 1 intact, 1 broken" in out
    assert main(["--db", str(db), "verify", "good"]) == 0


@pytest.mark.parametrize(
    ("edit", "seq", "reason"),
    [
        ('UPDATE events SET meta = \'{"state": "Done", "step": 1}\' WHERE seq = 4', 4, "hash"),
        ("UPDATE events SET recorded_at = 0 WHERE seq = 9", 9, "hash"),
        ("UPDATE events SET hash = NULL WHERE seq = 5", 5, "no hash"),
        ("DELETE FROM events WHERE seq = 6", 6, "seq 6 is missing"),
        ("DELETE FROM events WHERE seq = (SELECT MAX(seq) FROM events)", 18, "catalog says"),
        ("UPDATE events SET hash = NULL", 1, "no hash"),
    ],
)
def test_each_kind_of_edit_breaks_the_chain_where_it_was_made(
    tmp_path: Path, edit: str, seq: int, reason: str
) -> None:
    db = tmp_path / "log.db"
    record(db)
    tamper(db, edit)
    report = SQLiteEventStore(db, read_only=True).verify("r")
    assert report.broken is not None and report.broken.seq == seq
    assert reason in report.broken.reason


def test_the_hashes_survive_export_and_import(tmp_path: Path) -> None:
    db, copy = tmp_path / "log.db", tmp_path / "copy.db"
    record(db)
    lines = list(export_run(SQLiteEventStore(db), "r"))
    assert all(json.loads(line).get("hash") for line in lines[1:])
    target = SQLiteEventStore(copy)
    assert import_runs(target, lines) == ["r"]
    assert [e.hash for e in target.read("r")] == [e.hash for e in SQLiteEventStore(db).read("r")]
    assert target.verify("r").ok


def test_an_export_edited_after_it_was_made_is_refused_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, copy = tmp_path / "log.db", tmp_path / "copy.db"
    record(db, "first")
    record(db, "second")
    lines = [
        *export_run(SQLiteEventStore(db), "first"),
        *export_run(SQLiteEventStore(db), "second"),
    ]
    forged = [line.replace(LONG, FORGED) if i > 19 else line for i, line in enumerate(lines)]
    target = SQLiteEventStore(copy)
    with pytest.raises(ImportRefused, match=r"^line 35: the hash of seq 15 \(LlmResponded\)"):
        import_runs(target, forged)
    assert target.runs() == []
    (tmp_path / "forged.jsonl").write_text("\n".join(forged) + "\n")
    assert main(["--db", str(copy), "import", str(tmp_path / "forged.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 35" in err and "Nothing of the file" in err


def test_a_run_whose_chain_is_broken_in_the_log_is_not_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    record(db)
    tamper(db, f"UPDATE events SET payload = replace(payload, '{LONG}', '{FORGED}')")
    assert main(["--db", str(db), "export", "r"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "seq 15 (LlmResponded) does not match its hash; nothing was exported" in captured.err
    assert "agentsm verify r" in captured.err
    with pytest.raises(ExportRefused) as refused:  # the library says where, for scripts
        list(export_run(SQLiteEventStore(db), "r"))
    assert (refused.value.run_id, refused.value.seq, refused.value.kind) == (
        "r",
        15,
        "LlmResponded",
    )


def test_an_import_whose_chain_does_not_check_points_at_the_source_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    record(db)
    lines = list(export_run(SQLiteEventStore(db), "r"))
    forged = [line.replace(LONG, FORGED) for line in lines]
    (tmp_path / "forged.jsonl").write_text("\n".join(forged) + "\n")
    assert main(["--db", str(tmp_path / "copy.db"), "import", str(tmp_path / "forged.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "broken at the source" in err and "check the source with agentsm verify r" in err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda e: {**e, "payload": {**e["payload"], "step": "two"}},
            "line 4: Run r cannot be read: its StepStarted fact at seq 3",
        ),
        (lambda e: {**e, "kind": "Unheard"}, "knows no fact kind 'Unheard'"),
        (lambda e: {**e, "version": 7}, "is version 7, newer than version 1"),
        (lambda e: {k: v for k, v in e.items() if k != "meta"}, "a fact needs its meta"),
        (lambda e: {**e, "seq": 9}, "seq 9 where 3 was due"),
    ],
)
def test_an_export_with_a_fact_that_does_not_decode_imports_nothing(
    tmp_path: Path, change: object, message: str
) -> None:
    db = tmp_path / "log.db"
    record(db)
    lines = list(export_run(SQLiteEventStore(db), "r"))
    step = json.loads(lines[3])
    assert (step["seq"], step["kind"]) == (3, "StepStarted")
    lines[3] = json.dumps(change(step))  # type: ignore[operator]
    target = SQLiteEventStore(tmp_path / "copy.db")
    with pytest.raises(ImportRefused, match=message):
        import_runs(target, lines)
    assert target.runs() == []


def test_branch_copies_are_chained_in_their_own_run(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    record(db)
    child = branch_run(db, "r", 8, llm_response=LlmResponse.final_answer(FORGED)).run_id
    store = SQLiteEventStore(db)
    assert store.verify(child).ok and store.verify(child).unhashed == 0
    assert store.read(child)[0].hash != store.read("r")[0].hash  # the run id is hashed


def test_runs_recorded_before_hashes_are_said_so_and_continue_chained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY, db)
    assert main(["--db", str(db), "verify", "answer"]) == 0  # read-only: schema as written
    assert "8 facts recorded before hashes were kept" in capsys.readouterr().out
    store = SQLiteEventStore(db)  # migrated
    decide(store, "pending", "approved")
    report = store.verify("pending")
    assert report.ok and (report.events, report.unhashed) == (9, 8)
    assert main(["--db", str(db), "verify", "--all"]) == 0
    assert "1 chained, 8 recorded before hashes" in capsys.readouterr().out.replace(
        "facts chained", "chained"
    )
    store.append("answer", 8, [NewEvent("X", "{}")])
    tamper(db, "UPDATE events SET hash = NULL WHERE run_id = 'answer' AND seq = 9")
    broken = SQLiteEventStore(db, read_only=True).verify("answer").broken
    assert broken is not None and broken.seq == 9 and broken.reason == "the fact has no hash"


def test_an_import_the_store_refuses_midway_leaves_nothing_of_the_file(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    record(db, "first")
    record(db, "second")
    lines = [
        *export_run(SQLiteEventStore(db), "first"),
        *export_run(SQLiteEventStore(db), "second"),
    ]
    target = SQLiteEventStore(tmp_path / "copy.db")
    target._conn.execute(  # a store-level refusal that no check of the file can foresee
        "CREATE TRIGGER no_second BEFORE INSERT ON runs WHEN NEW.run_id = 'second' "
        "BEGIN SELECT RAISE(ABORT, 'full'); END"
    )
    with pytest.raises(StoreError):
        import_runs(target, lines)
    assert target.runs() == []
    target._conn.execute("DROP TRIGGER no_second")
    assert import_runs(target, lines) == ["first", "second"]


def test_an_export_states_its_length_and_head_and_a_cut_off_copy_imports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, copy = tmp_path / "log.db", tmp_path / "copy.db"
    record(db)
    source = SQLiteEventStore(db)
    lines = list(export_run(source, "r"))
    header = json.loads(lines[0])
    assert (header["facts"], header["head"]) == (len(lines) - 1, source.verify("r").head)
    target = SQLiteEventStore(copy)
    cut = "the file ends after line 10: run r has 9 facts of 18; it was cut off"
    with pytest.raises(ImportRefused, match=f"^{cut}"):
        import_runs(target, lines[:10])
    with pytest.raises(ImportRefused, match="^line 11: run r has 9 facts of 18; it was cut off"):
        import_runs(target, [*lines[:10], *export_run(source, "r")])  # cut, then another run
    assert target.runs() == []
    (tmp_path / "half.jsonl").write_text("\n".join(lines[:10]) + "\n")
    assert main(["--db", str(copy), "import", str(tmp_path / "half.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and cut in err and "Nothing of the file" in err


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda h: {**h, "head": "0" * 64}, "line 19: run r ends at hash "),
        (lambda h: {**h, "facts": 3}, "line 5: run r has more facts than the 3 its first line"),
        (lambda h: {**h, "facts": "all"}, "line 1: a run's facts must be a whole number"),
    ],
)
def test_an_export_whose_header_does_not_match_its_facts_imports_nothing(
    tmp_path: Path, change: object, message: str
) -> None:
    db = tmp_path / "log.db"
    record(db)
    lines = list(export_run(SQLiteEventStore(db), "r"))
    assert len(lines) == 19
    lines[0] = json.dumps(change(json.loads(lines[0])))  # type: ignore[operator]
    target = SQLiteEventStore(tmp_path / "copy.db")
    with pytest.raises(ImportRefused, match=message):
        import_runs(target, lines)
    assert target.runs() == []


def test_an_export_made_before_exports_stated_their_length_imports_with_status_imported(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    record(db)
    lines = list(export_run(SQLiteEventStore(db), "r"))
    header = json.loads(lines[0])
    del header["facts"], header["head"]
    target = SQLiteEventStore(tmp_path / "copy.db")
    assert import_runs(target, [json.dumps(header), *lines[1:10]]) == ["r"]
    assert target.run("r").status == "imported"  # not "done": nothing shows the file is whole
    assert SQLiteEventStore(db).run("r").status == "done"


def test_a_run_already_in_the_database_is_said_so_not_to_be_exported_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, other, copy = tmp_path / "log.db", tmp_path / "other.db", tmp_path / "copy.db"
    record(db)
    record(other)  # the same run id, recorded again: other times, other hashes
    target = SQLiteEventStore(copy)
    lines = list(export_run(SQLiteEventStore(db), "r"))
    assert import_runs(target, lines) == ["r"]
    assert import_runs(target, lines) == ["r"]  # already there, the same: left as it is
    assert len(target.read("r")) == len(lines) - 1
    (tmp_path / "run.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["--db", str(copy), "import", str(tmp_path / "run.jsonl")]) == 0
    assert capsys.readouterr().out == "already there r\n"
    with pytest.raises(ImportRefused) as different:
        import_runs(target, list(export_run(SQLiteEventStore(other), "r")))
    assert "run r is already in this database, with other facts" in str(different.value)
    assert "export the run again" not in str(different.value)
    assert [e.hash for e in target.read("r")] == [e.hash for e in SQLiteEventStore(db).read("r")]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            (
                "",
                "run-é",
                1,
                "ToolExecuted",
                2,
                '{"b": 1, "a": [1.5, 1e-7, "é"], "c": {"z": null, "y": true}}',
                '{"state": "Acting", "step": 3, "metrics": {"duration_ms": 0.25}}',
                1700000000.125,
            ),
            "0037ddc86850dfc6f9566a6d849a10d6f9c4d4dbc55d13d8fc7b143d2d0289d9",
        ),
        (
            ("ab" * 32, "r", 2, "X", 1, "not json", {"state": "Idle", "step": 0}, 0.0),
            "5033ac810771430298af63594d1b0aa6f400d70b1376f50302631e8209698f32",
        ),
        (
            (
                "ab" * 32,
                "r",
                3,
                "StepStarted",
                1,
                '{"kind": "StepStarted", "step": 4}',
                '{"state": "Planning", "step": 4}',
                1.5e9,
            ),
            "7294c1e610cd40f2487876f012b0f62fa089e40a028af117bc37c21b9d9d67c2",
        ),
    ],
)
def test_the_hash_of_an_event_never_changes(event: tuple[Any, ...], expected: str) -> None:
    # logs recorded by earlier releases verify only while these stay the same
    assert link_v1(*event) == expected
    assert link_v1(*event) == expected  # a second time, from the envelope cache


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            (
                "",
                "run-é",
                1,
                "ToolExecuted",
                2,
                '{"b": 1, "a": [1.5, 1e-7, "é"], "c": {"z": null, "y": true}}',
                '{"state": "Acting", "step": 3, "metrics": {"duration_ms": 0.25}}',
                1700000000.125,
            ),
            "2:Rfzuv1woIK1JTX95XFbzFd2ARYzUL2CwfbGth80Qj-0",
        ),
        (
            ("ab" * 32, "r", 2, "X", 1, "not json", {"state": "Idle", "step": 0}, 0.0),
            "2:h6cShLy2TdegFBnCYbIR8JvQ3aDA1Fd5-0M1mcff_Xo",
        ),
    ],
)
def test_the_version_2_hash_of_an_event_never_changes(
    event: tuple[Any, ...], expected: str
) -> None:
    assert link(*event) == expected


def test_a_version_2_hash_covers_the_payload_text_and_its_field_boundaries() -> None:
    base = ("", "r", 1, "X", 1, '{"a":1}', {"state": "Idle"}, 1.0)
    same_value = ("", "r", 1, "X", 1, '{"a": 1}', {"state": "Idle"}, 1.0)
    shifted = ("", "r", 1, "X1", 1, '{"a":1}', {"state": "Idle"}, 1.0)
    assert link(*base).startswith(V2)
    assert link(*base) != link(*same_value)  # the bytes are what is hashed
    assert link(*base) != link(*shifted)
    # the meta is hashed by value: the store hands it back parsed
    assert link(*base) == link("", "r", 1, "X", 1, '{"a":1}', '{"state": "Idle"}', 1.0)


def test_a_run_recorded_in_version_1_continues_in_version_2_and_verifies(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    record(db)
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT seq, kind, version, payload, meta, recorded_at FROM events ORDER BY seq"
    ).fetchall()
    previous = GENESIS
    tamper(db)  # drop the triggers, then rewrite the first half in version 1
    conn = sqlite3.connect(db)
    for seq, kind, version, payload, meta, at in rows[:8]:
        previous = link_v1(previous, "r", seq, kind, version, payload, meta, at)
        conn.execute("UPDATE events SET hash = ? WHERE seq = ?", (previous, seq))
    for seq, kind, version, payload, meta, at in rows[8:]:
        spaced = json.dumps(json.loads(payload))  # as another writer may encode it
        previous = link(previous, "r", seq, kind, version, spaced, meta, at)
        conn.execute(
            "UPDATE events SET hash = ?, payload = ? WHERE seq = ?", (previous, spaced, seq)
        )
    conn.commit()
    conn.close()
    store = SQLiteEventStore(db)
    assert store.verify("r").ok
    lines = list(export_run(store, "r"))
    assert ["payload_text" in json.loads(line) for line in lines[1:]] == [False] * 8 + [True] * (
        len(rows) - 8
    )
    copy = SQLiteEventStore(tmp_path / "copy.db")
    import_runs(copy, lines)
    assert [e.hash for e in copy.read("r")] == [e.hash for e in store.read("r")]
    assert copy.verify("r").ok
    store.close()
    tamper(db, "UPDATE events SET payload = payload || ' ' WHERE seq = 10")  # same value
    report = SQLiteEventStore(db, read_only=True).verify("r")
    assert report.broken is not None and report.broken.seq == 10
