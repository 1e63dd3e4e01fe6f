"""A live run is never resumed under it: the catalog names the process that drives a run, a
resume or a decision is refused while that process lives, and a superseded driver writes nothing.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentsm import AgentBuilder, HumanInputRequired, LlmResponse, MockLlmCaller, tool
from agentsm.errors import UnreadableFact
from eventstore import ConcurrencyError, Driver, NewEvent, RunInUse, SQLiteEventStore
from replay.resuming import resume_run

from .scenarios import LONG


def ev(kind: str) -> NewEvent:
    return NewEvent(kind, "{}", "{}", 1.0)


def test_a_driver_is_alive_while_its_process_runs_with_the_same_start_time() -> None:
    me = Driver.current()
    assert (me.host, me.pid) == (socket.gethostname(), os.getpid()) and me.alive()
    assert Driver(me.host, me.pid, "another start").alive() is False  # the pid was reused
    script = "from eventstore import Driver; d = Driver.current(); print(d.pid, d.started)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    pid, started = done.stdout.split()
    assert Driver(me.host, int(pid), started).alive() is False  # exited, even if pid reused
    assert Driver("another-host", me.pid).alive() is None  # only its lease can tell


def test_a_superseded_driver_cannot_append(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    first, second = SQLiteEventStore(path), SQLiteEventStore(path)
    first.create_run("r", "task", events=[ev("A")], status="running")
    first.claim("r")
    with pytest.raises(RunInUse, match=f"driven by pid {os.getpid()} on host "):
        second.claim("r")
    second.claim("r", force=True)
    with pytest.raises(ConcurrencyError, match="taken over.*Nothing was written"):
        first.append("r", 1, [ev("LATE")])  # at the right seq, but no longer its driver
    assert [e.kind for e in second.read("r")] == ["A"]
    assert second.append("r", 1, [ev("B")], status="waiting") == 2
    second.release("r")
    third = SQLiteEventStore(path)
    third.claim("r")  # released: anyone may take it up
    third.append("r", 2, [ev("C")])
    assert [e.kind for e in third.read("r")] == ["A", "B", "C"]


def test_a_driver_on_another_host_holds_the_run_until_its_lease_expires(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = SQLiteEventStore(path)
    store.create_run("r", "task", events=[ev("A")], status="running")
    plain = sqlite3.connect(path)
    for until in (time.time() + 3600, time.time() - 1):
        plain.execute(
            "UPDATE runs SET driver_host = 'elsewhere', driver_pid = 7, driver_token = 't', "
            "lease_until = ?",
            (until,),
        )
        plain.commit()
        if until > time.time():
            with pytest.raises(RunInUse, match="pid 7 on host elsewhere"):
                store.claim("r")
        else:
            store.claim("r")  # the lease ran out: its driver is taken for dead
    plain.close()


AGENT = """
import os, sys, time
from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller, tool
from eventstore import SQLiteEventStore

@tool
def hold(what: str) -> str:
    '''Holds the run in a non-idempotent tool until the test lets it go.'''
    open(sys.argv[2], "w").close()
    deadline = time.monotonic() + 600  # the test kills it sooner, pass or fail
    while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return "held " + what

responses = [LlmResponse.tool_call("hold", {"what": "x"}, id="h1"), LlmResponse.final_answer(%r)]
# a short lease, no tool timeout: a forced takeover asks about the call once the lease is out
AgentBuilder("Hold").llm(MockLlmCaller(responses)).tool(hold).config(
    AgentConfig(tool_timeout=None)).store(SQLiteEventStore(sys.argv[1], lease=1.0)).run_id(
    "run1").build().run()
"""


def builder(task: str) -> AgentBuilder:
    @tool
    def hold(what: str) -> str:
        """Holds the run in a non-idempotent tool until the test lets it go."""
        return "held " + what

    return AgentBuilder(task).llm(MockLlmCaller([LlmResponse.final_answer(LONG)])).tool(hold)


def test_a_run_alive_in_a_tool_is_not_resumed_under_it(tmp_path: Path) -> None:
    db, started, release = tmp_path / "runs.db", tmp_path / "started", tmp_path / "release"
    driver = subprocess.Popen(
        [sys.executable, "-c", AGENT % LONG, str(db), str(started), str(release)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert started.exists(), f"the driver never reached its tool (exit {driver.poll()})"
        with pytest.raises(RunInUse, match=f"pid {driver.pid} on host {socket.gethostname()}"):
            resume_run(db, "run1", builder)
        refused = subprocess.run(
            [sys.executable, "-m", "replay", "--db", str(db), "reject", "run1"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == 2 and f"pid {driver.pid}" in refused.stderr
        before = SQLiteEventStore(db, read_only=True).read("run1")
        assert before[-1].kind == "ToolCallStarted"  # nothing was written by the refusals
        with pytest.raises(HumanInputRequired, match="waits for a human decision on hold"):
            resume_run(db, "run1", builder, force=True)  # the human says the driver is stuck
        taken_over = SQLiteEventStore(db, read_only=True).read("run1")
        release.touch()
        _, err = driver.communicate(timeout=60)
        assert driver.returncode != 0 and "LeaseLost" in err
        assert SQLiteEventStore(db, read_only=True).read("run1") == taken_over  # its late
        # result was refused: the log holds what the new driver recorded, nothing more
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()


def test_a_running_run_whose_driver_is_gone_is_listed_as_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = SQLiteEventStore(path)
    store.create_run("r", "task", events=[ev("A")], status="running")
    script = "from eventstore import Driver; d = Driver.current(); print(d.pid, d.started)"
    exited = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    pid, started = exited.stdout.split()
    me, host = Driver.current(), socket.gethostname()
    plain = sqlite3.connect(path)
    cases = [
        ((host, me.pid, me.started, time.time() + 60), "running"),  # this process: alive
        ((host, int(pid), started, time.time() + 60), "interrupted"),  # killed: lease or not
        (("elsewhere", 7, "", time.time() + 60), "running"),  # another host, lease held
        (("elsewhere", 7, "", time.time() - 1), "interrupted"),  # its lease ran out
    ]
    for (d_host, d_pid, d_started, until), shown in cases:
        plain.execute(
            "UPDATE runs SET driver_host = ?, driver_pid = ?, driver_started = ?, "
            "driver_token = 't', lease_until = ?",
            (d_host, d_pid, d_started, until),
        )
        plain.commit()
        assert store.run("r").shown_status == shown
        assert store.run("r").status == "running"  # the catalog is not rewritten by a reader
        listed = subprocess.run(
            [sys.executable, "-m", "replay", "--db", str(path), "runs"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.stdout.splitlines()[1].split()[2] == shown, listed.stdout
    plain.close()


def test_a_resume_that_fails_before_running_gives_the_run_back(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    store = SQLiteEventStore(path)
    store.create_run("r", "task", events=[ev("A")], status="running")  # not a readable run
    with pytest.raises(UnreadableFact, match="Run r cannot be read"):
        resume_run(store, "r", builder)
    SQLiteEventStore(path).claim("r")  # not held by the failed resume: another may take it
