"""`agentsm migrate` where the world gets in its way: runs that live processes drive are
refused (unless --force) before anything is written; a migration killed while it compacted is
finished by running it again; a copy cut short never bears the backup's name; a PostgreSQL log
has nothing to migrate, which is no error."""

from __future__ import annotations

import json
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventstore import NewEvent, SQLiteEventStore
from eventstore.driver import Driver
from replay.cli import main

from .backends import POSTGRES_URL
from .test_format2 import record, tamper


def format1_log(db: Path, runs: int = 1) -> Path:
    """A log of format 1 with `runs` recorded runs (r0, r1, ...)."""
    with SQLiteEventStore(db, log_format=1) as store:
        for n in range(runs):
            record(store, f"r{n}", steps=2)
    return db


def drive(db: Path, run_id: str, host: str, pid: int, started: str, lease: float) -> None:
    """Name a driver of the run in the catalog, as a process's `claim` does."""
    conn = sqlite3.connect(db)
    conn.execute(
        "UPDATE runs SET status = 'running', driver_host = ?, driver_pid = ?, "
        "driver_started = ?, driver_token = 't', lease_until = ? WHERE run_id = ?",
        (host, pid, started, time.time() + lease, run_id),
    )
    conn.commit()
    conn.close()


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def log_format(db: Path) -> int:
    with SQLiteEventStore(db, read_only=True) as store:
        return store.log_format


def free_pages(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    finally:
        conn.close()


def test_runs_a_live_process_drives_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = format1_log(tmp_path / "log.db", runs=5)
    writer = SQLiteEventStore(db)  # a live process that drives four of the runs
    for n in range(4):
        writer.claim(f"r{n}")
    before = files(tmp_path)
    assert main(["--db", str(db), "migrate", "--backup", str(tmp_path / "copy.db")]) == 2
    said = capsys.readouterr().err
    me = Driver.current()
    assert "4 runs of" in said and "(r0, r1, r2 and 1 more; by pid" in said
    assert f"pid {me.pid} on host {me.host}" in said
    assert "Stop those processes (or let their runs finish) and run agentsm migrate again" in said
    assert "--force" in said and "Nothing was written" in said
    assert files(tmp_path) == before and log_format(db) == 1  # no copy, nothing converted
    writer.append("r0", writer.run("r0").last_seq, [NewEvent("Note", "{}")])  # it goes on
    for n in range(4):
        writer.release(f"r{n}")  # the runs let go: migrate goes ahead
    writer.close()
    assert main(["--db", str(db), "migrate", "--backup", str(tmp_path / "copy.db")]) == 0
    assert log_format(db) == 2


@pytest.mark.parametrize(
    ("host", "alive", "lease", "refused"),
    [
        ("elsewhere", False, 3600.0, True),  # another host: its lease is not over
        ("elsewhere", False, -1.0, False),  # another host, its lease ran out: taken for dead
        ("here", True, 3600.0, True),  # this host, its process runs
        ("here", False, 3600.0, False),  # this host, its process exited: the lease aside
    ],
)
def test_a_driver_is_taken_for_alive_as_a_claim_takes_it(
    tmp_path: Path, host: str, alive: bool, lease: float, refused: bool
) -> None:
    db = format1_log(tmp_path / "log.db")
    if host == "elsewhere":
        drive(db, "r0", "elsewhere", 7, "", lease)
    elif alive:
        me = Driver.current()
        drive(db, "r0", me.host, me.pid, me.started, lease)
    else:
        gone = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"],
            text=True,
            capture_output=True,
            check=True,
        )
        drive(db, "r0", socket.gethostname(), int(gone.stdout), "", lease)
    code = main(["--db", str(db), "migrate", "--backup", str(tmp_path / "copy.db")])
    assert (code, log_format(db)) == ((2, 1) if refused else (0, 2))
    assert (tmp_path / "copy.db").exists() is not refused


def test_force_migrates_and_says_to_restart_the_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = format1_log(tmp_path / "log.db")
    drive(db, "r0", "elsewhere", 7, "", 3600.0)
    assert main(["--db", str(db), "migrate", "--force", "--backup", str(tmp_path / "c.db")]) == 0
    said = capsys.readouterr().out
    assert "--force" in said and "pid 7 on host elsewhere" in said
    assert "restart those processes" in said and "can be resumed" in said
    assert log_format(db) == 2 and (tmp_path / "c.db").exists()
    with SQLiteEventStore(db, read_only=True) as store:
        assert store.verify("r0").ok


def test_a_run_claimed_while_the_copy_is_made_is_refused_and_the_copy_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = format1_log(tmp_path / "log.db")
    real_backup = SQLiteEventStore.backup
    writers: list[SQLiteEventStore] = []

    def backup_while_a_worker_claims(
        store: SQLiteEventStore, dest: str | Path, *, read_only: bool = False
    ) -> None:
        real_backup(store, dest, read_only=read_only)
        writers.append(SQLiteEventStore(db))
        writers[0].claim("r0")

    monkeypatch.setattr(SQLiteEventStore, "backup", backup_while_a_worker_claims)
    assert main(["--db", str(db), "migrate", "--backup", str(tmp_path / "copy.db")]) == 2
    assert "1 run of" in capsys.readouterr().err
    assert not (tmp_path / "copy.db").exists() and log_format(db) == 1
    assert not [name for name in files(tmp_path) if "partial" in name]
    writers[0].close()


def test_a_migration_killed_while_it_compacted_is_finished_by_running_it_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = format1_log(tmp_path / "log.db", runs=3)
    with SQLiteEventStore(db, create=False) as store:
        store.upgrade()  # converted and committed; VACUUM (all or nothing) never finished
    assert free_pages(db) > 0
    size = db.stat().st_size
    assert main(["--db", str(db), "migrate"]) == 0
    said = capsys.readouterr().out
    assert "already in log format 2; every hash chain intact (3 runs); compacted from" in said
    assert free_pages(db) == 0 and db.stat().st_size < size
    assert main(["--db", str(db), "migrate"]) == 0  # nothing left to do: said at once
    assert "already in log format 2, compacted; nothing to do" in capsys.readouterr().out


def test_an_uncompacted_format_2_log_whose_chain_breaks_is_not_compacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = format1_log(tmp_path / "log.db")
    tamper(db, "UPDATE events SET payload = replace(payload, 'Paris', 'Rome')")
    with SQLiteEventStore(db, create=False) as store:
        store.upgrade()
    pages = free_pages(db)
    assert main(["--db", str(db), "migrate"]) == 2
    assert "1 run of" in (said := capsys.readouterr().err) and "do not verify" in said
    assert "the log was not compacted" in said and free_pages(db) == pages


@pytest.mark.skipif(sys.platform == "win32", reason="a limit on the size of files is POSIX")
def test_a_copy_cut_short_by_a_kill_never_bears_the_backups_name(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with SQLiteEventStore(db, log_format=1) as store:
        store.create_run(
            "r", "t", events=[NewEvent("RunStarted", json.dumps({"task": "x" * 10**5}))]
        )
    copy = tmp_path / "copy.db"
    script = (  # killed (SIGXFSZ) by the first write that makes a file pass 60,000 bytes
        "import resource, signal, sys\n"
        "from replay.cli import main\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_DFL)\n"  # Python ignores it: die of it
        "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (60000, 60000))\n"
        "main(['--db', sys.argv[1], 'migrate', '--backup', sys.argv[2]])\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", script, str(db), str(copy)], capture_output=True, text=True
    )
    assert killed.returncode < 0, killed.stderr  # killed by a signal, in the middle of the copy
    assert not copy.exists() and log_format(db) == 1
    assert main(["--db", str(db), "migrate", "--backup", str(copy)]) == 0  # not "exists already"
    assert stat.S_IMODE(copy.stat().st_mode) & 0o222 == 0  # read-only
    with SQLiteEventStore(copy, read_only=True) as kept:
        assert kept.log_format == 1 and kept.verify("r").ok
    assert log_format(db) == 2


def test_a_backup_name_in_use_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = format1_log(tmp_path / "log.db")
    (tmp_path / "copy.db").write_text("mine")
    assert main(["--db", str(db), "migrate", "--backup", str(tmp_path / "copy.db")]) == 2
    assert "exists already" in capsys.readouterr().err
    assert (tmp_path / "copy.db").read_text() == "mine" and log_format(db) == 1


def test_a_postgresql_log_has_nothing_to_migrate_and_that_is_no_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for url in (POSTGRES_URL, "postgresql://127.0.0.1:5432/test"):
        assert main(["--db", url, "migrate"]) == 0
        assert "PostgreSQL" in (said := capsys.readouterr().out) and "nothing to migrate" in said
