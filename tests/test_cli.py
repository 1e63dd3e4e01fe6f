"""The `agentsm` command, run as a user runs it (a subprocess), on real database files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentsm import AgentMemory, State
from agentsm.trace import Trace
from eventstore import SQLiteEventStore, StoreError

ROOT = Path(__file__).resolve().parent.parent
FACTORY = f"{ROOT / 'tests' / 'agent_factory.py'}:make_agent"


def agentsm(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replay", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_demo_records_prints_rebuilds_replays_and_branches(tmp_path: Path) -> None:
    out = ok(agentsm("demo", cwd=tmp_path))
    assert "Answer: Paris is the capital of France." in out
    assert "Planning --ToolBlacklisted--> Planning" in out
    assert "identical to the engine memory" in out
    assert "Replay against the recording: run " in out and ": identical (45 facts" in out
    assert "B branched from A at seq 24" in out
    assert "\\n" not in out  # the program's own newlines are not escaped as recorded text
    hint = [line.strip() for line in out.splitlines() if line.startswith("  agentsm ")]
    assert hint[0] == "agentsm runs --tree"  # the demo wrote the log the commands read
    assert len(hint) == 4 and all(ok(agentsm(*line.split()[1:], cwd=tmp_path)) for line in hint)
    store = SQLiteEventStore(tmp_path / "agentsm.db", create=False)
    original, branch = store.runs()
    assert (original.status, branch.status, branch.parent_id) == ("done", "done", original.run_id)
    memory, state = AgentMemory.rebuild(store, original.run_id)
    assert state == State.Done and memory.step == 5 and len(memory.history) == 5


def test_db_is_taken_before_or_after_the_command_and_from_the_environment(
    tmp_path: Path,
) -> None:
    before = ok(agentsm("--db", "before.db", "demo", cwd=tmp_path))
    assert "\n  agentsm --db before.db runs --tree\n" in before  # the hint names the log
    ok(agentsm("demo", "--db", "after.db", cwd=tmp_path))
    from_env = ok(agentsm("demo", cwd=tmp_path, env={"AGENTSM_DB": "env.db"}))
    assert "\n  agentsm runs --tree\n" in from_env  # $AGENTSM_DB is what the commands read
    assert not (tmp_path / "agentsm.db").exists()
    for name in ("before.db", "after.db", "env.db"):
        assert len(SQLiteEventStore(tmp_path / name, create=False).runs()) == 2
        listed = ok(agentsm("runs", "--db", name, cwd=tmp_path))
        assert listed.count("done") == 2


def test_inspection_commands_on_a_demo_database(tmp_path: Path) -> None:
    ok(agentsm("demo", cwd=tmp_path))
    db = ["--db", "agentsm.db"]
    runs = ok(agentsm(*db, "runs", cwd=tmp_path))
    assert runs.splitlines()[0].split() == [
        "id",
        "task",
        "status",
        "steps",
        "tokens",
        "cost",
        "model",
        "started",
        "duration",
        "parent",
        "answer",
        "/",
        "error",
    ]
    original, branch = (line.split()[0] for line in runs.splitlines()[1:])
    assert "\033[" not in runs  # plain when piped
    tree = ok(agentsm(*db, "runs", "--tree", cwd=tmp_path))
    assert f"└ {branch}" in tree and f"{original}@24" in tree
    shown = ok(agentsm(*db, "show", original[:6], cwd=tmp_path))
    assert "ParallelActing --ToolSuccess--> Observing" in shown
    lines = ok(agentsm(*db, "show", original, "--json", cwd=tmp_path)).splitlines()
    assert len(lines) == 45 and json.loads(lines[0])["fact"]["kind"] == "RunStarted"
    memory = ok(agentsm(*db, "memory", original, "--at", "20", cwd=tmp_path))
    assert ok(agentsm(*db, "memory", original, "--seq", "20", cwd=tmp_path)) == memory  # a guess
    assert "state ParallelActing" in memory and "history (1 entry)" in memory
    as_json = json.loads(ok(agentsm(*db, "memory", original, "--at", "20", "--json", cwd=tmp_path)))
    assert as_json["state"] == "ParallelActing" and as_json["memory"]["step"] == 2
    replayed = agentsm(*db, "replay", original, cwd=tmp_path)
    assert replayed.returncode == 0 and "identical" in replayed.stdout
    diff = ok(agentsm(*db, "diff", original, branch, cwd=tmp_path))
    assert "B branched from A at seq 24" in diff and "first difference at seq 27" in diff
    new = ok(
        agentsm(
            *db, "branch", original, "--at", "12", "--answer", "Paris, surely enough.", cwd=tmp_path
        )
    ).split()[0]
    child = SQLiteEventStore(tmp_path / "agentsm.db").run(new)
    assert (child.parent_id, child.branch_seq) == (original, 12)


def test_replay_all_with_a_builder_reports_each_run(tmp_path: Path) -> None:
    ok(agentsm("demo", cwd=tmp_path))
    db = ["--db", "agentsm.db"]
    same = agentsm(*db, "replay", "--all", "--builder", "replay.demo:demo_agent", cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    assert "2 runs replayed: 2 identical, 0 diverged" in same.stdout
    changed = tmp_path / "changed_agent.py"
    changed.write_text(
        "from replay.demo import demo_agent\n"
        "def make(task):\n"
        "    return demo_agent(task).system_prompt('You are a sloppy assistant.')\n"
        "def looser(task):\n"
        "    return demo_agent(task).max_steps(20)\n"
    )
    looser = agentsm(*db, "replay", "--all", "--builder", f"{changed}:looser", cwd=tmp_path)
    assert looser.returncode == 1
    assert looser.stdout.count("definition changed (config.max_steps); behaviour identical") == 2
    assert (
        "2 runs replayed: 0 identical, 0 diverged, 2 with a changed definition and identical "
        "behaviour" in looser.stdout
    )
    diverged = agentsm(*db, "replay", "--all", "--builder", f"{changed}:make", cwd=tmp_path)
    assert diverged.returncode == 1
    assert diverged.stdout.count("definition changed (system_prompt); DIVERGED  at seq 4") == 2
    assert "the LLM request changed: messages" in diverged.stdout
    assert "2 runs replayed: 0 identical, 2 diverged" in diverged.stdout
    one = agentsm(
        *db, "replay", diverged.stdout.split()[0], "--builder", f"{changed}:make", cwd=tmp_path
    )
    assert (
        one.returncode == 1 and '+    "system_prompt": "You are a sloppy assistant."' in one.stdout
    )


def test_errors_name_the_problem(tmp_path: Path) -> None:
    ok(agentsm("demo", cwd=tmp_path))
    db = ["--db", "agentsm.db"]
    run_id = ok(agentsm(*db, "runs", cwd=tmp_path)).splitlines()[1].split()[0]
    unknown = agentsm(*db, "show", run_id[:-1] + "x", cwd=tmp_path)
    assert unknown.returncode == 2 and f"Closest ids: {run_id}" in unknown.stderr
    (tmp_path / "notes.db").write_text("plain text, not sqlite " * 50)
    bad = agentsm("--db", "notes.db", "runs", cwd=tmp_path)
    assert bad.returncode == 2 and "not a usable SQLite database" in bad.stderr
    import sqlite3

    conn = sqlite3.connect(tmp_path / "agentsm.db")
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    newer = agentsm(*db, "runs", cwd=tmp_path)
    assert newer.returncode == 2 and "schema version 99, newer than" in newer.stderr
    missing = agentsm("--db", "nothere.db", "runs", cwd=tmp_path)
    assert missing.returncode == 2 and "No database at 'nothere.db'" in missing.stderr
    needs = agentsm("--db", "nothere.db", "resume", "abc", cwd=tmp_path)
    assert needs.returncode == 2 and "--builder" in needs.stderr
    for result in (unknown, bad, newer, missing, needs):
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        "demo",
        "runs",
        "show",
        "memory",
        "replay",
        "branch",
        "diff",
        "resume",
        "approve",
        "reject",
        "modify",
        "export",
        "import",
    ],
)
def test_every_command_has_help_with_an_example(command: str, tmp_path: Path) -> None:
    assert "example: agentsm" in ok(agentsm(command, "--help", cwd=tmp_path))


def test_export_and_import_move_a_family_between_databases(tmp_path: Path) -> None:
    ok(agentsm("demo", cwd=tmp_path))
    store = SQLiteEventStore(tmp_path / "agentsm.db")
    original, branch = (r.run_id for r in store.runs())
    for run in (original, branch):
        (tmp_path / f"{run}.jsonl").write_text(
            ok(agentsm("--db", "agentsm.db", "export", run, cwd=tmp_path))
        )
        ok(agentsm("--db", "copy.db", "import", f"{run}.jsonl", cwd=tmp_path))
    copy = SQLiteEventStore(tmp_path / "copy.db")
    assert [r.run_id for r in copy.runs()] == [original, branch]
    assert copy.read(branch) == store.read(branch)
    assert copy.run(branch).parent_id == original
    again = agentsm("--db", "copy.db", "import", f"{original}.jsonl", cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == f"already there {original}\n"
    assert ok(agentsm("--db", "copy.db", "replay", original, cwd=tmp_path))


@pytest.mark.parametrize("content", ["", "\n\n", None])
def test_import_of_a_file_without_runs_says_so_and_creates_no_database(
    tmp_path: Path, content: str | None
) -> None:
    name = os.devnull
    if content is not None:
        (tmp_path / "empty.jsonl").write_text(content)
        name = "empty.jsonl"
    result = agentsm("--db", "new.db", "import", name, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and f"no runs in {name}" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("new.db")) == []


def test_a_refused_import_leaves_no_new_database_and_keeps_an_old_one(tmp_path: Path) -> None:
    ok(agentsm("demo", cwd=tmp_path))
    original = SQLiteEventStore(tmp_path / "agentsm.db").runs()[0].run_id
    lines = ok(agentsm("--db", "agentsm.db", "export", original, cwd=tmp_path)).splitlines()
    (tmp_path / "half.jsonl").write_text("\n".join(lines[:20]) + "\n")
    result = agentsm("--db", "new.db", "import", "half.jsonl", cwd=tmp_path)
    assert result.returncode == 2 and "it was cut off" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("new.db")) == []
    result = agentsm("--db", "agentsm.db", "import", "half.jsonl", cwd=tmp_path)
    assert result.returncode == 2 and "it was cut off" in result.stderr
    assert len(SQLiteEventStore(tmp_path / "agentsm.db").runs()) == 2


# -- durable approval and crash resume, across processes --------------------------------------


def start_run(db: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "from agent_factory import make_agent\n"
        "from agentsm import HumanInputRequired\n"
        f"engine = make_agent('Pay ann 30').store({str(db)!r}).run_id('run1').build()\n"
        "try:\n"
        "    print(engine.run())\n"
        "except HumanInputRequired as e:\n"
        "    print('WAITING', e.requests[0].call.name)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )


def run_until_waiting(db: Path) -> None:
    """Record run1 in a subprocess until it waits for approval; it never outlives the test."""
    proc = start_run(db, {"AGENTSM_TEST_APPROVAL": "1"})
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert out.strip() == "WAITING pay", err


def test_durable_approval_across_processes(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_until_waiting(db)
    store = SQLiteEventStore(db)
    assert store.run("run1").status == "waiting"
    env = {"AGENTSM_TEST_APPROVAL": "1"}
    resumed = agentsm(
        "--db", str(db), "resume", "run1", "--builder", FACTORY, cwd=tmp_path, env=env
    )
    assert resumed.returncode == 3 and "tool requires approval" in resumed.stdout
    assert "waiting #1: pay(" in resumed.stdout  # #N names the call even when ids repeat
    decided = agentsm(
        "--db",
        str(db),
        "modify",
        "run1",
        "--args",
        '{"amount": 5, "to": "ann"}',
        "--note",
        "cap at 5",
        cwd=tmp_path,
        env=env,
    )
    assert "modified" in ok(decided)
    assert store.run("run1").status == "ready"
    answer = ok(
        agentsm("--db", str(db), "resume", "run1", "--builder", FACTORY, cwd=tmp_path, env=env)
    )
    assert "paid 5 to ann" in answer
    memory, state = AgentMemory.rebuild(store, "run1")
    assert state == State.Done and memory.history[0].tool.args == {"amount": 5, "to": "ann"}
    assert store.run("run1").status == "done"
    report = agentsm("--db", str(db), "replay", "run1", "--builder", FACTORY, cwd=tmp_path, env=env)
    assert report.returncode == 0, report.stdout  # the resumed run replays identical


def test_reject_from_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_until_waiting(db)
    env = {"AGENTSM_TEST_APPROVAL": "1"}
    not_waiting = agentsm("--db", str(db), "approve", "nope", cwd=tmp_path, env=env)
    assert not_waiting.returncode == 2 and "Unknown run id 'nope'" in not_waiting.stderr
    ok(agentsm("--db", str(db), "reject", "run1", "--note", "no", cwd=tmp_path, env=env))
    twice = agentsm("--db", str(db), "approve", "run1", cwd=tmp_path, env=env)
    assert twice.returncode == 2 and "not waiting for a human" in twice.stderr
    ok(agentsm("--db", str(db), "resume", "run1", "--builder", FACTORY, cwd=tmp_path, env=env))
    memory, _ = AgentMemory.rebuild(SQLiteEventStore(db), "run1")
    assert memory.history[0].observation.startswith("ERROR: HumanRejected:")


def wait_for(db: Path, kind: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                with SQLiteEventStore(db, create=False) as store:
                    if any(e.kind == kind for e in store.read("run1")):
                        return
            except StoreError:
                pass  # not created yet, or the run is not in the catalog yet
        time.sleep(0.05)
    raise AssertionError(f"no {kind} in {db} after {timeout}s")


def kill_while_running(
    db: Path, env: dict[str, str], started_tool: str, effect: Path | None = None
) -> None:
    """Start the run in a subprocess and SIGKILL it once `started_tool` is recorded as started
    (and its `effect` written); the subprocess never outlives the test, even when it fails."""
    proc = start_run(db, env)
    try:
        deadline = time.monotonic() + 120  # generous: a loaded machine imports slowly
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"the run ended before it was killed: {proc.communicate()[1]}")
            assert time.monotonic() < deadline, f"{started_tool} never started in {db}"
            wait_for(db, "ToolCallStarted", timeout=120)
            with SQLiteEventStore(db, create=False) as store:
                names = [
                    e.fact.call.name
                    for e in Trace.load(store, "run1")
                    if e.event == "ToolCallStarted"
                ]
            if started_tool in names and (
                effect is None or (effect.exists() and effect.read_text())
            ):
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_sigkill_mid_tool_then_resume_asks_whether_it_took_effect(tmp_path: Path) -> None:
    db, ledger = tmp_path / "runs.db", tmp_path / "ledger.txt"
    env = {"AGENTSM_TEST_SLOW": "1", "AGENTSM_TEST_LEDGER": str(ledger)}
    kill_while_running(db, env, "pay", effect=ledger)
    assert ledger.read_text() == "30 ann\n"
    store = SQLiteEventStore(db)
    assert store.run("run1").status == "running"
    memory, state = AgentMemory.rebuild(store, "run1")
    assert state == State.Acting and memory.in_flight == ("pay-1",)
    interrupted = agentsm("--db", str(db), "replay", "run1", "--builder", FACTORY, cwd=tmp_path)
    assert interrupted.returncode == 0, interrupted.stdout  # replays up to where it died
    env = {"AGENTSM_TEST_LEDGER": str(ledger)}
    asked = agentsm("--db", str(db), "resume", "run1", "--builder", FACTORY, cwd=tmp_path, env=env)
    assert asked.returncode == 3 and "did it take effect?" in asked.stdout
    assert ledger.read_text() == "30 ann\n"  # not silently paid twice
    ok(
        agentsm(
            "--db", str(db), "reject", "run1", "--note", "it went through", cwd=tmp_path, env=env
        )
    )
    ok(agentsm("--db", str(db), "resume", "run1", "--builder", FACTORY, cwd=tmp_path, env=env))
    assert ledger.read_text() == "30 ann\n"
    memory, state = AgentMemory.rebuild(store, "run1")
    assert state == State.Done
    assert memory.history[0].observation.startswith("ERROR: OutcomeUnknown:")
    facts = store.read("run1")
    assert [e.seq for e in facts] == list(range(1, len(facts) + 1))
    replayed = agentsm("--db", str(db), "replay", "run1", "--builder", FACTORY, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout  # crash and resume are replayed too


def test_sigkill_mid_idempotent_tool_then_resume_runs_it_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    kill_while_running(db, {"AGENTSM_TEST_SLOW_BALANCE": "1"}, "balance")
    memory, state = AgentMemory.rebuild(SQLiteEventStore(db), "run1")
    assert state == State.Acting and memory.in_flight == ("bal-2",)
    answer = ok(agentsm("--db", str(db), "resume", "run1", "--builder", FACTORY, cwd=tmp_path))
    assert "balance 70" in answer
    trace = Trace.load(SQLiteEventStore(db), "run1")
    started = [e.fact.call.id for e in trace if e.event == "ToolCallStarted"]
    assert started.count("bal-2") == 2  # started, interrupted, started again
    memory, state = AgentMemory.rebuild(SQLiteEventStore(db), "run1")
    assert state == State.Done and memory.in_flight == ()
    replayed = agentsm("--db", str(db), "replay", "run1", "--builder", FACTORY, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stdout
