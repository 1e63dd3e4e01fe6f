"""Recorded text is shown with its control characters escaped, by the library and the CLI."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from agentsm import AgentBuilder, AgentConfig, LlmResponse, MockLlmCaller
from agentsm.text import printable
from replay.cli import main

CLEAR, TITLE, CSI8 = "\x1b[2J\x1b[H", "\x1b]0;pwned\x07", "\x9b31m"
BIDI = "\u202eevil\u202c"
HOSTILE = f"{CLEAR}{TITLE}red{CSI8}{BIDI}\r\x00"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_printable_escapes_controls_and_bidi_and_keeps_ordinary_text() -> None:
    assert printable("\x1b[2J") == "\\x1b[2J"
    assert printable("a\x07b\x7f\x9b") == "a\\x07b\\x7f\\x9b"
    assert printable("\u202eabc\u2066") == "\\u202eabc\\u2066"
    assert printable("A\udcffB") == "A\\udcffB"  # a lone surrogate cannot be printed
    assert printable("line\nnext\ttab\r") == "line\\nnext\\ttab\\r"
    assert printable("line\nnext\ttab\r", lines=True) == "line\nnext\ttab\\r"
    assert printable("Zürich 東京 ✓ — é") == "Zürich 東京 ✓ — é"
    once = printable("\x1b")
    assert printable(once) == once  # escaping is applied once


def hostile_tool(query: str) -> str:
    """Return what a hostile web page said."""
    return f"page for {query}: {HOSTILE}"


def record_hostile_run(db: Path) -> str:
    llm = MockLlmCaller(
        [
            LlmResponse.tool_call("hostile_tool", {"query": f"q{TITLE}"}, id="c1"),
            LlmResponse.final_answer(f"The answer is {HOSTILE} done"),
        ]
    )
    engine = (
        AgentBuilder(f"task {TITLE}")
        .llm(llm)
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(hostile_tool)
        .store(db)
        .build()
    )
    engine.run()
    return engine.run_id


def assert_escaped(text: str) -> None:
    raw = RAW.findall(text)
    assert not raw, f"raw control characters {raw!r} in output:\n{text}"


def test_trace_print_escapes_recorded_text(tmp_path: Path) -> None:
    from agentsm.trace import Trace
    from eventstore import SQLiteEventStore

    run_id = record_hostile_run(tmp_path / "h.db")
    buffer = io.StringIO()
    Trace.load(SQLiteEventStore(tmp_path / "h.db"), run_id).print(file=buffer)
    shown = buffer.getvalue()
    assert_escaped(shown.replace("\n", ""))
    assert "\\x1b[2J" in shown and "\\x1b]0;pwned\\x07" in shown


def test_every_command_shows_recorded_control_characters_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "h.db")
    run_id = record_hostile_run(tmp_path / "h.db")
    builder = tmp_path / "changed.py"
    builder.write_text(
        "from agentsm import AgentBuilder, MockLlmCaller\n"
        "def make(task):\n"
        "    return AgentBuilder(task + '\\x9b5m').llm(MockLlmCaller())\n"
    )
    outputs = {}
    commands: list[list[str]] = [
        ["runs"],
        ["runs", "--tree"],
        ["show", run_id],
        ["memory", run_id],
        ["memory", run_id, "--at", "12"],
        ["branch", run_id, "--at", "6", "--answer", f"new {HOSTILE}"],
        ["replay", run_id, "--builder", f"{builder}:make"],
        ["replay", "--all"],
    ]
    for command in commands:
        main(["--db", db, *command])
        outputs[" ".join(command[:2])] = capsys.readouterr()
    branch = outputs[f"branch {run_id}"].out.split()[0]
    main(["--db", db, "diff", run_id, branch])
    outputs["diff"] = capsys.readouterr()
    main(["--db", db, "show", run_id + "\x1b[2J"])
    outputs["error"] = capsys.readouterr()
    for name, result in outputs.items():
        assert_escaped(result.out.replace("\n", "") + result.err.replace("\n", ""))
        assert result.out or result.err, name
    assert "\\x1b]0;pwned\\x07" in outputs[f"show {run_id}"].out
    assert "\\u202eevil\\u202c" in outputs[f"memory {run_id}"].out
    assert "\\x9b5m" in outputs[f"replay {run_id}"].out  # the definition's diff
    assert "\\x1b[2J" in outputs["diff"].out
    assert "\\x1b[2J" in outputs["error"].err
    exported = [
        json.loads(line) for line in main_lines(db, "show", run_id, "--json", capsys=capsys)
    ]
    assert TITLE in exported[0]["fact"]["task"]  # JSON keeps the exact text, escaped by JSON


def main_lines(db: str, *args: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    main(["--db", db, *args])
    return capsys.readouterr().out.splitlines()
