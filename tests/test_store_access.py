"""The log as other processes and people meet it: inspection that only reads (also where the
user may only read), damaged files, backups of a live log, durability settings."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentsm import AgentBuilder, BuildError, LlmResponse, MockLlmCaller, tool
from eventstore import Durability, NewEvent, SQLiteEventStore, StoreError

from .scenarios import LONG

ROOT = Path(__file__).resolve().parent.parent
INSPECT = [
    ["runs"],
    ["show", "run1"],
    ["memory", "run1", "--at", "3"],
    ["replay", "run1"],
    ["export", "run1"],
]


def record(db: Path, *, crash: bool) -> None:
    """Record run1 in another process; `crash` ends it without closing the store, so its last
    facts are only in the -wal file (as after a kill)."""
    script = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "from agent_factory import make_agent\n"
        "engine = make_agent('Pay ann 30').store(sys.argv[1]).run_id('run1').build()\n"
        "engine.run()\n"
        "os._exit(0) if sys.argv[2] == 'crash' else engine.store.close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(db), "crash" if crash else "close"],
        check=True,
        timeout=120,
    )


def _without_permission_overrides() -> None:
    """In the child, before exec: drop root's power to ignore file permissions
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from the capability bounding set, so that the
    kernel applies the modes of files and directories to it as to any user."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def agentsm(*args: str, reader: bool = False) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it; `reader` makes file permissions apply to it even when
    the tests run as root."""
    return subprocess.run(
        [sys.executable, "-m", "replay", *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_without_permission_overrides if reader and os.geteuid() == 0 else None,
    )


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder whose files the test makes read-only, made writable again for the cleanup."""
    folder = tmp_path / "logs"
    folder.mkdir()
    try:
        yield folder
    finally:
        for path in [folder, *folder.iterdir()]:
            path.chmod(0o755 if path.is_dir() else 0o644)


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}


@pytest.mark.parametrize("crash", [False, True], ids=["closed", "crashed-with-wal"])
def test_inspection_works_where_the_user_may_only_read(read_only_dir: Path, crash: bool) -> None:
    logs = read_only_dir
    db = logs / "runs.db"
    record(db, crash=crash)
    assert Path(f"{db}-wal").exists() == crash
    for path in logs.iterdir():
        path.chmod(0o444)
    logs.chmod(0o555)
    before = snapshot(logs)
    for command in INSPECT:
        result = agentsm("--db", str(db), *command, reader=True)
        assert result.returncode == 0, (command, result.stderr)
    assert "run1" in agentsm("--db", str(db), "runs", reader=True).stdout
    written = agentsm("--db", str(db), "branch", "run1", "--at", "2", "--answer", "x", reader=True)
    assert written.returncode == 2 and "readonly" in written.stderr, written.stderr
    assert "damaged" not in written.stderr  # said to be what it is: a log this user may not write
    assert snapshot(logs) == before  # nothing written, not even a checkpoint


def test_inspection_never_writes_to_the_log(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    record(db, crash=True)  # facts in the -wal that a closing writer would checkpoint
    main_file = (db.read_bytes(), db.stat().st_mtime_ns)
    for command in INSPECT:
        result = agentsm("--db", str(db), *command)
        assert result.returncode == 0, (command, result.stderr)
    assert (db.read_bytes(), db.stat().st_mtime_ns) == main_file
    with SQLiteEventStore(db, read_only=True) as store:
        with pytest.raises(StoreError, match="readonly"):
            store.append("run1", store.run("run1").last_seq, [NewEvent("X", "{}")])


def damaged_log(path: Path) -> None:
    store = SQLiteEventStore(path)
    event = NewEvent("A", '{"x": "%s"}' % ("y" * 300), "{}", 1.0)
    for run in range(5):
        store.create_run(f"r{run}", "task", events=[event] * 200)
    store.close()
    with path.open("r+b") as f:  # garbage over pages in the middle of the file
        f.seek(path.stat().st_size // 2)
        f.write(b"\xff" * 40960)


def test_a_damaged_file_gives_a_clear_error(tmp_path: Path) -> None:
    garbage, damaged = tmp_path / "garbage.db", tmp_path / "damaged.db"
    garbage.write_bytes(b"these are not the bytes of a database " * 200)
    damaged_log(damaged)
    with SQLiteEventStore(damaged, read_only=True) as store:
        assert len(store.runs()) == 5
        with pytest.raises(StoreError, match="not a usable SQLite database: damaged"):
            for run in store.runs():
                store.read(run.run_id)
    for db, command in [(garbage, ["runs"]), (damaged, ["export", "r2"])]:
        result = agentsm("--db", str(db), *command)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert "not a usable SQLite database" in result.stderr, result.stderr


def test_backup_holds_the_facts_that_are_only_in_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    record(db, crash=True)
    assert Path(f"{db}-wal").stat().st_size > 0
    with SQLiteEventStore(db, read_only=True) as live:
        facts = live.read("run1")
    plain = tmp_path / "plain-copy.db"
    shutil.copy(db, plain)  # what a user copying only the .db gets: the WAL's facts are lost
    with SQLiteEventStore(plain) as copied:
        held = [e for run in copied.runs() for e in copied.read(run.run_id)]
        assert len(held) < len(facts)
    result = agentsm("backup", str(tmp_path / "backup.db"), "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert not Path(f"{tmp_path / 'backup.db'}-wal").exists()  # one self-contained file
    with SQLiteEventStore(tmp_path / "backup.db", read_only=True) as backup:
        assert backup.read("run1") == facts
        assert backup.run("run1").status == "done"
    again = agentsm("--db", str(db), "backup", str(tmp_path / "backup.db"))
    assert again.returncode == 2 and "exists already" in again.stderr


def sync_level_at_each_commit(statements: list[str]) -> list[str]:
    """From SQLite's statement trace: the `synchronous` level each COMMIT of facts ran under."""
    level, levels, facts = "NORMAL", [], False
    for sql in statements:
        if sql.startswith("PRAGMA synchronous"):
            level = sql.rsplit("=", 1)[1].strip()
        elif sql.startswith(("INSERT INTO events", "INSERT INTO facts")):
            facts = True
        elif sql == "COMMIT" and facts:
            levels.append(level)
            facts = False
    return levels


@pytest.mark.parametrize("durability", ["normal", "full"])
def test_durability_full_syncs_the_commits_an_effect_follows(
    tmp_path: Path, durability: Durability
) -> None:
    store = SQLiteEventStore(tmp_path / "log.db", durability=durability)
    store.create_run("r", "task", events=[NewEvent("A", "{}")])
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    store.append("r", 1, [NewEvent("B", "{}")], durable=True)
    store.append("r", 2, [NewEvent("C", "{}")])
    expected = ["FULL", "NORMAL"] if durability == "full" else ["NORMAL", "NORMAL"]
    assert sync_level_at_each_commit(statements) == expected
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL again
    with pytest.raises(StoreError, match="durability must be one of 'normal', 'full'"):
        SQLiteEventStore(tmp_path / "other.db", durability="fast")  # type: ignore[arg-type]


def test_a_full_durability_agent_has_its_tool_call_on_disk_before_the_tool_runs(
    tmp_path: Path,
) -> None:
    store = SQLiteEventStore(tmp_path / "runs.db")
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    seen_by_tool: list[list[str]] = []

    @tool
    def pay(amount: int) -> str:
        """Pay (an effect)."""
        seen_by_tool.append(sync_level_at_each_commit(statements))
        return "paid"

    engine = (
        AgentBuilder("Pay 3")
        .llm(
            MockLlmCaller(
                [LlmResponse.tool_call("pay", {"amount": 3}), LlmResponse.final_answer(LONG)]
            )
        )
        .tool(pay)
        .store(store)
        .durability("full")
        .build()
    )
    engine.run()
    assert seen_by_tool[0][-1] == "FULL"  # ToolCallStarted was synced before the tool ran
    levels = sync_level_at_each_commit(statements)
    assert levels[-1] == "FULL"  # the run handed back to its caller
    assert "NORMAL" in levels  # transitions no effect follows stay fast
    with pytest.raises(BuildError, match="durability must be one of"):
        AgentBuilder("x").durability("always")  # type: ignore[arg-type]


def test_a_directory_given_as_the_log_is_named_as_one(tmp_path: Path) -> None:
    result = agentsm("--db", str(tmp_path), "runs")
    assert result.returncode == 2 and "is a directory" in result.stderr, result.stderr
