"""Log format 2 (eventstore.sqlite_format2): a new SQLite log packs a run's facts into few,
narrow rows (at most five a plan-act step), reads every fact back exactly as it was written,
keeps format 1's hash chain (so a change anywhere is found), and a log of format 1 is converted
only when asked (`upgrade`, `agentsm migrate`)."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    LlmResponse,
    MockLlmCaller,
    ToolCall,
    Trace,
    tool,
)
from agentsm.memory import fold_with_state
from eventstore import LogTampered, NewEvent, SQLiteEventStore, StoreError, sqlite_format2
from eventstore.migrations import FORMAT1, LATEST, migrate
from eventstore.reading import events_checked, read_checked
from replay import Recording, replay_run
from replay.cli import main

LONG = "The answer, which is long enough to be accepted: Paris."
LEGACY = Path(__file__).parent / "fixtures" / "legacy" / "legacy-0.1.0.db"


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city} is a capital with many museums"


def record(store: SQLiteEventStore, run_id: str = "r", steps: int = 4) -> None:
    """A run of `steps` plan-act steps (one tool call each, the last two in parallel), then
    an answer."""
    script = [LlmResponse.tool_call("lookup", {"city": f"c{n}"}) for n in range(steps - 1)]
    script.append(
        LlmResponse.tool_calls(
            [ToolCall(name="lookup", args={"city": c}, id=f"p{c}") for c in ("Lyon", "Nice")]
        )
    )
    config = AgentConfig(reflect_every_n_steps=0, max_steps=steps + 2)
    builder = AgentBuilder("Find the capital").llm(
        MockLlmCaller([*script, LlmResponse.final_answer(LONG)])
    )
    builder.tool(lookup).config(config).store(store).run_id(run_id).build().run()


def tamper(db: Path, *statements: str) -> None:
    """Edit the log as someone with write access would: triggers dropped first."""
    conn = sqlite3.connect(db)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        conn.execute(f"DROP TRIGGER {name}")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


def test_a_new_log_is_format_2_and_a_plan_act_step_writes_at_most_five_rows(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as store:
        assert store.log_format == 2
        record(store, steps=8)
        facts = store.read("r")
        assert store.verify("r").ok and replay_run(store, "r").identical
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST
    per_step = dict(conn.execute("SELECT step, COUNT(*) FROM facts GROUP BY step").fetchall())
    steps = sorted(step for step in per_step if 1 < step < 8)  # whole plan-act steps
    assert steps and all(per_step[step] <= 5 for step in steps), per_step
    assert sum(per_step.values()) < len(facts) / 1.8  # about ten facts a step, five rows
    kept = conn.execute("SELECT COUNT(*) FROM facts WHERE hash IS NOT NULL").fetchone()[0]
    assert kept < sum(per_step.values())  # a row inside an append keeps no hash


def test_every_fact_reads_back_as_written_from_any_point(tmp_path: Path) -> None:
    with SQLiteEventStore(tmp_path / "log.db") as store:
        record(store)
        full = store.read("r")
        assert [e.seq for e in full] == list(range(1, len(full) + 1))
        assert store.verify("r").head == full[-1].hash
        rows = [(e.seq, e.kind, e.version, e.payload, e.meta, e.recorded_at) for e in full]
        for after in range(len(full)):
            for upto in range(after + 1, len(full) + 1, 3):
                assert store.read("r", after=after, upto=upto) == full[after:upto]
                bare = store.read_payloads("r", after=after, upto=upto)
                assert [r[:4] + r[5:] for r in bare] == [r[:4] + r[5:] for r in rows[after:upto]]
                previous = full[after - 1].hash if after else ""
                checked = list(
                    read_checked(store, "r", after=after, previous=previous or "", upto=upto)
                )
                assert [c[0] for c in checked] == list(range(after + 1, upto + 1))
                events = events_checked(store, "r", after=after, previous=previous, upto=upto)
                assert list(events) == full[after:upto]


def test_both_formats_give_the_same_facts_the_same_hashes(tmp_path: Path) -> None:
    events = [
        NewEvent("RunStarted", '{"task":"t"}', '{"state":"Idle","step":0}', 1.5),
        NewEvent(
            "Transitioned",
            '{"event":"Start","to_state":"Planning"}',
            '{"state":"Idle","step":0}',
            1.5,
            rides=True,
        ),
        NewEvent("StepStarted", '{"step":1}', '{"state":"Planning","step":1}', 1.5, rides=True),
        NewEvent(
            "LlmRequested",
            '{"purpose":"plan","é":"ü \\u2028"}',
            '{"state":"Planning","step":1,"metrics":{"ms":2}}',
            2.25,
        ),
        NewEvent("Odd", '{"a": 1,  "b":[1.0, 2]}', "{}", 3.0, version=3, rides=True),
        NewEvent("Plain", '"just text"', '{"custom":true,"state":"X","step":1}', 4.0, rides=True),
    ]
    stores = [SQLiteEventStore(tmp_path / f"f{n}.db", log_format=n) for n in (1, 2)]
    for store in stores:
        store.create_run("r", "t", events=events[:2])
        store.append("r", 2, events[2:])
        assert store.verify("r").ok
    one, two = (s.read("r") for s in stores)
    assert one == two
    assert [e.payload for e in two] == [e.payload for e in events]


def test_a_fact_recorded_at_an_infinite_time_reads_back(tmp_path: Path) -> None:
    meta = '{"state":"Planning","step":1}'
    events = [
        NewEvent("RunStarted", '{"task":"t"}', meta, 1.0),
        NewEvent("Note", '{"n":1}', meta, 2.0),
        NewEvent("Transitioned", '{"event":"E","to_state":"S"}', meta, math.inf, rides=True),
        NewEvent("Transitioned", '{"event":"E","to_state":"S"}', meta, -math.inf, rides=True),
    ]
    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as store:
        store.create_run("r", "t", events=events[:1])
        store.append("r", 1, events[1:])
    with SQLiteEventStore(db) as store:
        assert [e.recorded_at for e in store.read("r")] == [1.0, 2.0, math.inf, -math.inf]
        assert store.verify("r").ok and len(list(read_checked(store, "r"))) == 4
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 4
    conn.close()


def test_an_append_does_not_fail_when_another_thread_starts_the_texts_memo_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Cleared(dict[str, Any]):
        """A memo that another thread starts again right after each look-up."""

        def __contains__(self, key: object) -> bool:
            found = super().__contains__(key)
            self.clear()
            return found

    monkeypatch.setattr(sqlite_format2, "_NAMED", Cleared())
    meta = '{"state":"Planning","step":1}'
    ride = NewEvent("Transitioned", '{"event":"E","to_state":"S"}', meta, 1.0, rides=True)
    with SQLiteEventStore(tmp_path / "log.db") as store:
        store.create_run("r", "t", events=[NewEvent("RunStarted", "{}", meta, 1.0), ride])
        store.append("r", 2, [NewEvent("Note", "{}", meta, 1.0), ride])
        assert [e.payload for e in store.read("r")][1::2] == [ride.payload] * 2


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE facts SET more = replace(more, 'step\\\":1', 'step\\\":2')",  # a rider's payload
        "UPDATE facts SET payload = replace(payload, 'Paris', 'Rome')",  # the answer
        "UPDATE facts SET at = at + 1 WHERE seq = 5",  # a recording time
        "UPDATE facts SET meta = NULL WHERE meta IS NOT NULL AND seq > 4",  # measurements
        "UPDATE facts SET step = step + 1 WHERE seq = 9",  # an envelope
        "DELETE FROM facts WHERE seq = (SELECT MAX(seq) FROM facts)",  # the last row
        "UPDATE facts SET more = NULL WHERE seq = 2",  # riders dropped
        "UPDATE facts SET hash = X'01' || hash WHERE hash IS NOT NULL",  # text, not UTF-8
    ],
)
def test_a_change_to_any_fact_of_a_row_is_found(tmp_path: Path, edit: str) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as store:
        record(store)
    tamper(db, edit)
    with SQLiteEventStore(db) as store:
        assert not store.verify("r").ok
        with pytest.raises(LogTampered, match="Run r's log was changed after it was recorded"):
            Trace.load(store, "r")
        with pytest.raises(LogTampered):
            replay_run(store, "r")


def test_verify_names_a_deleted_last_row_as_the_readers_do(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as store:
        record(store)
        last = store.run("r").last_seq
    tamper(db, "DELETE FROM facts WHERE seq = (SELECT MAX(seq) FROM facts)")
    with SQLiteEventStore(db) as store:
        broken = store.verify("r").broken
        assert broken is not None and broken.cause == "cut", broken  # not "no hash" before it
        assert broken.seq == last and f"has {last} facts" in broken.reason
        with pytest.raises(LogTampered, match=f"seq {last} is missing"):
            Trace.load(store, "r")


def appended(db: Path) -> None:
    """A run of two appends, each ending in a row with riders (the kept hash on its last one)."""
    meta = '{"state":"Planning","step":1}'
    with SQLiteEventStore(db) as store:
        store.create_run("r", "t", events=[NewEvent("RunStarted", '{"task":"t"}', meta, 1.0)])
        for last in (1, 4):
            store.append(
                "r",
                last,
                [
                    NewEvent("Said", '{"text":"Paris"}', meta, 2.0),
                    NewEvent("Transitioned", '{"event":"E","to_state":"S"}', meta, 2.0, rides=True),
                    NewEvent("StepStarted", '{"step":2}', meta, 2.0, rides=True),
                ],
            )


@pytest.mark.parametrize(
    "edits",
    [
        (  # the hash of the run's last row removed, then a fact it covered changed
            "UPDATE facts SET hash = NULL WHERE seq = 5",
            "UPDATE facts SET payload = replace(payload, 'Paris', 'Rome') WHERE seq = 5",
        ),
        (  # the last fact taken out of the last row, and the catalog told the run is shorter
            "UPDATE facts SET more = json_remove(more, '$[#-1]') WHERE seq = 5",
            "UPDATE runs SET last_seq = 6",
        ),
    ],
)
def test_a_run_whose_last_row_keeps_no_hash_is_found(tmp_path: Path, edits: tuple[str]) -> None:
    db = tmp_path / "log.db"
    appended(db)
    tamper(db, *edits)
    with SQLiteEventStore(db) as store:
        report = store.verify("r")
        assert report.broken is not None and "lost its hash" in report.broken.problem
        with pytest.raises(LogTampered, match="lost its hash"):
            list(read_checked(store, "r"))
        with pytest.raises(LogTampered, match="lost its hash"):
            list(events_checked(store, "r"))


def test_a_checked_read_that_ends_inside_an_append_checks_on_to_its_kept_hash(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    appended(db)  # facts 2 to 4 one append, its hash kept with fact 4
    tamper(db, "UPDATE facts SET payload = replace(payload, 'Paris', 'Rome') WHERE seq = 2")
    with SQLiteEventStore(db) as store:
        for upto in (2, 3):
            with pytest.raises(LogTampered, match="seq 4"):
                list(events_checked(store, "r", upto=upto))
            with pytest.raises(LogTampered, match="seq 4"):
                list(read_checked(store, "r", upto=upto))


def test_a_name_removed_from_the_names_table_breaks_the_chain_where_it_was_used(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    appended(db)
    tamper(db, "DELETE FROM names WHERE name = 'Said'")  # its trigger dropped first
    with SQLiteEventStore(db) as store:
        broken = store.verify("r").broken
        assert broken is not None and broken.seq == 4  # the first kept hash after it
        with pytest.raises(LogTampered, match="seq 4"):
            list(read_checked(store, "r"))


def test_the_database_refuses_to_change_or_misplace_a_row(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as store:
        record(store)
    conn = sqlite3.connect(db)
    for sql in (
        "UPDATE facts SET payload = '{}' WHERE seq = 1",
        "DELETE FROM facts WHERE seq = 1",
        "INSERT INTO facts (run, seq, last, kind, payload, at) VALUES (1, 3, 3, 1, '{}', 0)",
        "INSERT INTO facts (run, seq, last, kind, payload, at) VALUES (99, 1, 1, 1, '{}', 0)",
        "UPDATE runs SET key = 7",
        "DELETE FROM runs",
        "UPDATE names SET name = 'Forged' WHERE code = 1",
        "DELETE FROM names",
    ):
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute(sql)
    conn.close()


def test_a_format1_log_is_converted_only_when_asked_and_then_reads_and_goes_on(
    tmp_path: Path,
) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db, log_format=1) as store:
        record(store, "old")
        head = store.verify("old").head
    with SQLiteEventStore(db) as store:  # opened to write by this release: left in format 1
        assert store.log_format == 1
        record(store, "also-old")
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == FORMAT1
    conn.close()
    with SQLiteEventStore(db) as store:
        assert store.upgrade() == 2 and store.log_format == 2
        assert store.verify("old").head == head
        assert replay_run(store, "old").identical and replay_run(store, "also-old").identical
        last = store.run("old").last_seq
        store.append(
            "old", last, [NewEvent("Note", '{"n":1}'), NewEvent("Note", '{"n":2}', rides=True)]
        )
        assert store.verify("old").ok and len(store.read("old")) == last + 2
        record(store, "new")
        assert store.verify("new").ok


def test_facts_of_a_run_missing_from_the_catalog_keep_a_log_in_format_1(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db, log_format=1) as store:
        record(store, "kept")
        record(store, "gone")
    tamper(db, "DELETE FROM runs WHERE run_id = 'gone'")  # its facts stay in events
    with SQLiteEventStore(db) as store:
        with pytest.raises(StoreError, match="'gone'.*left in format 1"):
            store.upgrade()
        assert store.log_format == 1 and store.verify("kept").ok
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM events WHERE run_id = 'gone'").fetchone()[0] > 0
    conn.close()


def test_runs_get_their_keys_in_one_pass_over_the_catalog(tmp_path: Path) -> None:
    import sqlite_utils

    db = tmp_path / "log.db"
    SQLiteEventStore(db, log_format=1).close()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.executemany(
        "INSERT INTO runs (run_id, task, status, created_at, updated_at) VALUES (?, '', '', 0, 0)",
        [(f"run-{n:05d}",) for n in range(3000)],
    )
    work = [0]  # thousands of SQLite instructions the conversion takes

    def count() -> int:
        work[0] += 1
        return 0

    conn.set_progress_handler(count, 1000)
    conn.execute("BEGIN IMMEDIATE")
    migrate(sqlite_utils.Database(conn), FORMAT1)
    conn.execute("COMMIT")
    conn.set_progress_handler(None, 0)
    assert [k for (k,) in conn.execute("SELECT key FROM runs ORDER BY rowid")] == list(
        range(1, 3001)
    )
    conn.close()
    assert work[0] < 3000  # a few instructions a run, not a pass over the catalog for each


def test_a_log_of_the_first_release_upgrades_and_replays_identical(tmp_path: Path) -> None:
    db = tmp_path / "legacy.db"
    shutil.copy(LEGACY, db)
    with SQLiteEventStore(db) as store:
        before = {
            r.run_id: fold_with_state(e.fact for e in Recording.load(store, r.run_id).entries)
            for r in store.runs()
        }
        store.upgrade()
        for run_id, (memory, state) in before.items():
            assert store.verify(run_id).ok
            again = fold_with_state(e.fact for e in Recording.load(store, run_id).entries)
            assert again == (memory, state)
            assert replay_run(store, run_id).identical


def test_sql_readers_see_one_row_per_fact_and_search_finds_words(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as store:
        record(store)
        facts = store.read("r")
        found = store.search("museums Lyon")
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT run_id, seq, kind, payload, recorded_at, version FROM events ORDER BY seq"
    ).fetchall()
    assert rows == [("r", e.seq, e.kind, e.payload, e.recorded_at, e.version) for e in facts]
    metas = conn.execute("SELECT seq, meta FROM events WHERE meta IS NOT NULL").fetchall()
    assert metas and all(json.loads(meta) == facts[seq - 1].meta for seq, meta in metas)
    kept = conn.execute("SELECT COUNT(*) FROM events WHERE hash IS NOT NULL").fetchone()[0]
    assert kept == conn.execute("SELECT COUNT(*) FROM facts WHERE hash IS NOT NULL").fetchone()[0]
    assert found and found[0][0] == "r" and found[0][2] == "ToolExecuted"
    assert "[museums]" in found[0][3] and "[Lyon]" in found[0][3]


def test_a_store_opened_before_a_run_was_recorded_finds_its_facts_by_kind(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as reader:  # a long-lived reader: it knows no kind yet
        with SQLiteEventStore(db) as writer:
            record(writer)
            facts = writer.read("r")
            kinds = sorted({e.kind for e in facts})
            found = writer.events_of(kinds)
        assert [(e.seq, e.kind) for e in found] == [(e.seq, e.kind) for e in facts]
        assert reader.events_of(kinds) == found


@pytest.mark.parametrize("log_format", [1, 2])
def test_facts_by_kind_since_a_time_include_those_a_row_holds(
    tmp_path: Path, log_format: int
) -> None:
    meta = '{"state":"Planning","step":1}'
    events = [
        NewEvent("RunStarted", '{"task":"t"}', meta, 1.0),
        NewEvent("Note", '{"n":1}', meta, 1.0),
        NewEvent("Transitioned", '{"event":"E","to_state":"S"}', meta, 5.0, rides=True),
    ]
    with SQLiteEventStore(tmp_path / "log.db", log_format=log_format) as store:
        store.create_run("r", "t", events=events)
        found = store.events_of(["Note", "Transitioned"], since=3.0)
        assert [(e.seq, e.kind, e.recorded_at) for e in found] == [(3, "Transitioned", 5.0)]


def test_agentsm_migrate_backs_up_converts_and_says_when_there_is_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db, log_format=1) as store:
        record(store)
    assert main(["--db", str(db), "migrate", "--backup", str(tmp_path / "copy.db")]) == 0
    said = capsys.readouterr().out
    assert "backed up" in said and "migrated" in said and "1 run, every hash chain intact" in said
    with SQLiteEventStore(tmp_path / "copy.db", read_only=True) as copy:
        assert copy.log_format == 1 and copy.verify("r").ok
    with SQLiteEventStore(db, create=False) as store:
        assert store.log_format == 2 and replay_run(store, "r").identical
    assert main(["--db", str(db), "migrate"]) == 0
    assert "already in log format 2, compacted; nothing to do" in capsys.readouterr().out
    assert main(["--db", str(tmp_path / "none.db"), "migrate"]) == 2
    assert "No log at" in capsys.readouterr().err
    assert main(["--db", "postgresql://u@127.0.0.1:1/x", "migrate"]) == 0  # no error
    assert "nothing to migrate" in capsys.readouterr().out


@pytest.mark.skipif(sys.platform == "win32", reason="a limit on the size of files is POSIX")
def test_a_disk_that_takes_no_more_is_said_so_and_the_log_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db, log_format=1) as store:
        store.create_run(
            "r", "t", events=[NewEvent("RunStarted", json.dumps({"task": "x" * 10**5}))]
        )
    script = (  # no file may grow past 60,000 bytes, as on a disk that is full
        "import resource, signal, sys\n"
        "from eventstore import SQLiteEventStore\n"
        "from replay.cli import main\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (60000, 60000))\n"
        "print('migrate', main(['--db', sys.argv[1], 'migrate']))\n"
        "with SQLiteEventStore(sys.argv[1]) as store:\n"
        "    try:\n"
        "        store.compact()\n"
        "    except Exception as e:\n"
        "        print(type(e).__name__, e)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(db)], capture_output=True, text=True)
    assert "migrate 2" in done.stdout, done.stderr
    assert "Could not back up" in done.stderr and "a disk may be full" in done.stderr
    assert "StoreError Could not read or write" in done.stdout and "may be full" in done.stdout
    assert "damaged" not in done.stdout + done.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if ".format1-" in p.name) == []
    with SQLiteEventStore(db, create=False) as store:
        assert store.log_format == 1 and store.verify("r").ok


def test_a_read_only_store_cannot_upgrade(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db, log_format=1) as store:
        record(store)
    with (
        SQLiteEventStore(db, read_only=True) as store,
        pytest.raises(StoreError, match="read-only"),
    ):
        store.upgrade()


def test_agentsm_migrate_refuses_a_changed_log_and_backs_up_an_old_one_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = tmp_path / "changed.db"
    with SQLiteEventStore(changed, log_format=1) as store:
        record(store)
    tamper(changed, "UPDATE events SET payload = replace(payload, 'Paris', 'Rome')")
    assert main(["--db", str(changed), "migrate"]) == 2
    assert "do not verify" in capsys.readouterr().err
    with SQLiteEventStore(changed, read_only=True) as store:
        assert store.log_format == 1  # nothing converted
    old = tmp_path / "legacy.db"
    shutil.copy(LEGACY, old)
    version = sqlite3.connect(old).execute("PRAGMA user_version").fetchone()[0]
    assert main(["--db", str(old), "migrate", "--backup", str(tmp_path / "as-it-was.db")]) == 0
    copy = sqlite3.connect(tmp_path / "as-it-was.db")
    assert copy.execute("PRAGMA user_version").fetchone()[0] == version < FORMAT1


def test_verify_all_goes_on_past_a_run_whose_id_was_edited_into_text_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from replay.cli import main

    db = tmp_path / "log.db"
    with SQLiteEventStore(db) as store:
        record(store, "bad")
        record(store, "good")
    tamper(db, "UPDATE runs SET run_id = CAST(X'41FF42' AS TEXT) WHERE run_id = 'bad'")
    assert main(["--db", str(db), "verify", "--all"]) == 1
    said = capsys.readouterr().out
    assert "run good: intact" in said and "cannot be checked" in said and "not UTF-8" in said
    assert "2 runs verified: 1 intact, 1 broken" in said
