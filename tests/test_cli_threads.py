"""`agentsm chat`, `agentsm threads`, and `--thread` on show, replay and branch."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from eventstore import SQLiteEventStore
from replay.cli import main

ROOT = Path(__file__).resolve().parent.parent
AGENT = f"{ROOT / 'tests' / 'thread_agent.py'}:make_agent"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def chat(
    capsys: pytest.CaptureFixture[str], db: Path, text: str, *more: str
) -> tuple[int, str, str]:
    sys.stdin = io.StringIO(text)
    try:
        return run(capsys, "chat", "--builder", AGENT, "--db", str(db), *more)
    finally:
        sys.stdin = sys.__stdin__


def thread_of(err: str) -> str:
    return err.split("thread ", 1)[1].split(" ", 1)[0]


def test_chat_reads_piped_lines_and_records_every_turn(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    done = subprocess.run(
        [sys.executable, "-m", "replay", "chat", "--builder", AGENT, "--db", str(db)],
        input="Hello\n\nlook up Oslo\n/exit\nnever sent\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "Answer 1 to 'Hello'; earlier: nothing",
        "Answer 2 to 'look up Oslo'; earlier: Hello",
    ]
    thread = thread_of(done.stderr)
    assert done.stderr.startswith(f"agentsm: thread {thread} (new)")
    store = SQLiteEventStore(db, create=False)
    assert [r.run_id for r in store.runs()] == [f"{thread}-1", f"{thread}-2"]


def test_chat_goes_on_with_a_thread_and_tells_failed_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "chat.db"
    code, out, err = chat(capsys, db, "one\n", "--thread", "t1")
    assert (code, out) == (0, "Answer 1 to 'one'; earlier: nothing\n"), err
    code, out, err = chat(capsys, db, "fail\ntwo\n", "--thread", "t1")
    assert code == 0 and "thread t1 (1 turn so far)" in err
    assert "this turn failed: LLM call failed: RuntimeError: the model is unavailable" in err
    assert out == "Answer 3 to 'two'; earlier: one / fail\n"


def test_threads_lists_the_conversations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "chat.db"
    chat(capsys, db, "first\nsecond\n", "--thread", "alpha")
    chat(capsys, db, "other\n", "--thread", "beta")
    code, out, _ = run(capsys, "threads", "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["thread", "turns", "status", "last"]
    assert lines[1].split()[:4] == ["alpha", "2", "done", "second"]
    assert lines[2].split()[:4] == ["beta", "1", "done", "other"]
    code, out, _ = run(capsys, "threads", "--db", str(db), "--json", "-n", "1")
    [beta] = json.loads(out)
    assert (beta["thread_id"], beta["turns"], beta["last_run"]) == ("beta", 1, "beta-1")
    assert beta["answer"] == "Answer 1 to 'other'; earlier: nothing"
    empty = tmp_path / "empty.db"
    SQLiteEventStore(empty).close()
    assert "No threads in" in run(capsys, "threads", "--db", str(empty))[1]


def test_show_replay_and_branch_a_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "chat.db"
    chat(capsys, db, "one\nlook up Rome\nthree\nfour\n", "--thread", "main")
    code, out, _ = run(capsys, "show", "--thread", "main", "--db", str(db))
    assert code == 0
    assert out.splitlines()[:4] == [
        "thread main  4 turns",
        "turn 1  main-1  done",
        "  you: one",
        "  agent: Answer 1 to 'one'; earlier: nothing",
    ]
    code, out, _ = run(capsys, "show", "--thread", "main", "--json", "--db", str(db))
    said = [json.loads(line) for line in out.splitlines()]
    assert [m["role"] for m in said] == ["user", "assistant"] * 4 and said[3]["run_id"] == "main-2"
    code, out, _ = run(capsys, "replay", "--thread", "main", "--db", str(db))
    assert code == 0, out
    assert [line.split()[:4] for line in out.splitlines()[:4]] == [
        ["turn", str(n), f"main-{n}", "identical"] for n in range(1, 5)
    ]
    assert "thread main: 4 turns replayed, 4 identical" in out
    code, out, _ = run(
        capsys,
        "branch",
        "--thread",
        "main",
        "--turn",
        "3",
        "--message",
        "THREE",
        "--builder",
        AGENT,
        "--db",
        str(db),
    )
    assert code == 0, out
    first, answer = out.splitlines()
    new = first.split()[1]
    assert first == f"thread {new}  (from thread main at turn 3)  turn 3: run {new}-3  done"
    assert answer == "Answer 3 to 'THREE'; earlier: one / look up Rome"
    code, out, _ = run(capsys, "show", "--thread", new, "--db", str(db))
    assert out.splitlines()[0] == f"thread {new}  3 turns  (branched from thread main at turn 3)"
    code, out, _ = run(capsys, "runs", "--tree", "--db", str(db))
    rows = [line.split()[:2] for line in out.splitlines()[1:]]
    assert rows == [
        ["main-1", "one"],
        ["└", "main-2"],
        ["└", "main-3"],
        ["└", "main-4"],
        ["└", f"{new}-3"],
    ]
    code, out, _ = run(capsys, "show", "main-3", "--db", str(db))
    assert out.splitlines()[1] == "turn 3 of thread main, after run main-2"


def test_thread_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "chat.db"
    chat(capsys, db, "one\n", "--thread", "main")
    for args, said in (
        (["show", "main-1", "--thread", "main"], "RUN does not go with --thread"),
        (["show"], "Missing argument 'RUN'"),
        (["show", "--thread", "nope"], "The log holds no thread 'nope'"),
        (["replay", "--thread", "main", "--all"], "--every does not go with --thread"),
        (["branch", "main-1"], "Missing option '--at'"),
        (["branch", "main-1", "--at", "3", "--turn", "2"], "--turn goes with --thread ID"),
        (["branch", "--thread", "main", "--turn", "1"], "needs --turn N"),
        (
            ["branch", "--thread", "main", "--turn", "5", "--message", "x", "--builder", AGENT],
            "branch it at a turn from 1 to 2, not 5",
        ),
        (["chat"], "This command needs your agent"),
    ):
        code, _, err = run(capsys, *args, "--db", str(db))
        assert code == 2 and said in err, (args, err)


def test_chat_says_how_to_answer_a_turn_that_asks_a_person(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "chat.db"
    sys.stdin = io.StringIO("ask me where\nnever sent\n")
    asking = f"{ROOT / 'tests' / 'outside_agent.py'}:make_agent"
    try:
        code, _, err = run(capsys, "chat", "--builder", asking, "--db", str(db), "--thread", "q")
    finally:
        sys.stdin = sys.__stdin__
    assert code == 3
    assert "waiting: ask_human" in err and "Which city?" in err
    assert "answer it (agentsm answer q-1 TEXT)" in err and "approve" not in err
    assert "the lines after this one were not sent" in err
