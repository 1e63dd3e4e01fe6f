"""Workspace tools: each tool, each way out of the workspace refused as data, limits, the shell,
approvals by default, and a run that replays and branches with the workspace deleted."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentMemory,
    BuildError,
    HumanInputRequired,
    LlmResponse,
    State,
    ToolRegistry,
)
from agentsm.tools.workspace import Workspace, WorkspaceLimits, shell_environment
from eventstore import SQLiteEventStore
from replay import replay_run
from replay.branching import branch_run
from replay.resuming import decide, pending_requests, resume_run

LONG = "Fixed the bug in app.py, and the check passes now."


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 1\n")
    (root / "README").write_text("hello\n")
    (tmp_path / "secret.txt").write_text("the password")
    return root


def registry(root: Path, **limits: Any) -> ToolRegistry:
    tools = ToolRegistry()
    for item in Workspace(root, limits=WorkspaceLimits(**limits)).tools():
        tools.add(item)
    return tools


def call(tools: ToolRegistry, name: str, **args: Any) -> str:
    return tools.execute(name, args).observation


# -- each tool ------------------------------------------------------------------------------


def test_read_file_returns_the_text_and_reads_on_by_lines(ws: Path) -> None:
    tools = registry(ws)
    assert (
        call(tools, "read_file", path="src/app.py") == "SUCCESS: " + (ws / "src/app.py").read_text()
    )
    part = call(tools, "read_file", path="src/app.py", offset=2, limit=2)
    assert part.startswith("SUCCESS:     return 1\n\n[lines 2-3 of 6 shown")
    assert part.endswith("read on with offset=4]")
    assert "past the end" in call(tools, "read_file", path="README", offset=9)
    (ws / "empty").write_text("")
    assert call(tools, "read_file", path="empty") == "SUCCESS: 'empty' is empty (0 bytes)."
    assert call(tools, "read_file", path="nope.py").startswith("ERROR: FileNotFound: 'nope.py'")
    assert call(tools, "read_file", path="src").startswith("ERROR: IsADirectory: 'src'")


def test_write_file_creates_parents_and_replaces(ws: Path) -> None:
    tools = registry(ws)
    made = call(tools, "write_file", path="pkg/sub/new.txt", content="héllo\n")
    assert made == "SUCCESS: wrote 7 bytes to 'pkg/sub/new.txt' (a new file)."
    assert (ws / "pkg/sub/new.txt").read_text() == "héllo\n"
    again = call(tools, "write_file", path="pkg/sub/new.txt", content="x")
    assert again == "SUCCESS: wrote 1 bytes to 'pkg/sub/new.txt' (replacing 7 bytes)."
    assert call(tools, "write_file", path="src", content="x").startswith("ERROR: IsADirectory")


def test_edit_file_replaces_one_exact_match_or_all(ws: Path) -> None:
    tools = registry(ws)
    done = call(
        tools,
        "edit_file",
        path="src/app.py",
        old_text="f():\n    return 1",
        new_text="f():\n    return 2",
    )
    assert done == "SUCCESS: replaced 1 occurrence in 'src/app.py' at line 1; it is now 46 bytes."
    assert (ws / "src/app.py").read_text().startswith("def f():\n    return 2\n")
    every = call(
        tools, "edit_file", path="src/app.py", old_text="return", new_text="yield", replace_all=True
    )
    assert every.startswith("SUCCESS: replaced 2 occurrences in 'src/app.py' (the first at line 2)")
    assert (ws / "src/app.py").read_text().count("yield") == 2


def test_an_ambiguous_edit_changes_nothing_and_says_where(ws: Path) -> None:
    before = (ws / "src/app.py").read_text()
    out = call(registry(ws), "edit_file", path="src/app.py", old_text="return 1", new_text="x")
    assert out.startswith(
        "ERROR: AmbiguousMatch: old_text occurs 2 times in 'src/app.py' (at lines 2, 6); "
        "nothing was changed."
    )
    assert "replace_all" in out and "     6 |     return 1" in out
    assert (ws / "src/app.py").read_text() == before


def test_a_missing_edit_shows_the_closest_line_and_whitespace_hints(ws: Path) -> None:
    tools = registry(ws)
    before = (ws / "src/app.py").read_text()
    typo = call(tools, "edit_file", path="src/app.py", old_text="retrun 1", new_text="x")
    assert typo.startswith("ERROR: NoMatch: old_text was not found in 'src/app.py' (6 lines)")
    assert "line 2:\n     1 | def f():\n     2 |     return 1" in typo
    spaces = call(
        tools, "edit_file", path="src/app.py", old_text="def f():\n  return 1", new_text="x"
    )
    assert "It does occur if spaces, tabs and line breaks are ignored" in spaces
    nothing = call(tools, "edit_file", path="src/app.py", old_text="zzzz qqqq", new_text="x")
    assert "No line resembles its first line" in nothing
    assert "InvalidArguments: old_text is empty" in call(
        tools, "edit_file", path="src/app.py", old_text="", new_text="x"
    )
    assert (ws / "src/app.py").read_text() == before


def test_list_files_shows_sizes_dirs_links_and_stops_at_its_limit(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref")
    os.symlink("app.py", ws / "src" / "alias.py")
    top = call(registry(ws), "list_files")
    assert top == "SUCCESS: ./\n.git/\nREADME (6 bytes)\nsrc/"
    every = call(registry(ws), "list_files", recursive=True)
    assert ".git/ (not listed)" in every and "src/alias.py -> app.py" in every
    assert "src/app.py (46 bytes)" in every and "HEAD" not in every
    short = call(registry(ws, list_entries=2), "list_files", recursive=True)
    assert short.endswith(
        "[stopped at 2 entries: list a subdirectory, or use search_files, to see more]"
    )
    assert call(registry(ws), "list_files", path="README").startswith("ERROR: NotADirectory")


def test_search_files_finds_lines_with_limits(ws: Path) -> None:
    tools = registry(ws)
    out = call(tools, "search_files", pattern=r"return \d")
    assert out == (
        "SUCCESS: src/app.py:2:     return 1\nsrc/app.py:6:     return 1\n"
        "[2 matching lines in 1 file; 2 files searched under '.']"
    )
    assert "README:1: hello" in call(tools, "search_files", pattern="HELLO", ignore_case=True)
    assert call(tools, "search_files", pattern="hello", glob="*.py").startswith("SUCCESS: no line")
    assert call(tools, "search_files", pattern="(").startswith("ERROR: InvalidPattern: '('")
    (ws / "blob.bin").write_bytes(b"\0return 1")
    (ws / "many.txt").write_text("return 1\n" * 50)
    capped = call(registry(ws, search_matches=3), "search_files", pattern="return")
    assert capped.count("\n") == 4 and "stopped at the limit of 3 matches" in capped
    assert "1 binary skipped" in call(tools, "search_files", pattern="return", path=".")
    outside = call(tools, "search_files", pattern="password", path="..")
    assert outside.startswith("ERROR: OutsideWorkspace")


# -- confinement ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool_name, extra",
    [
        ("read_file", {}),
        ("write_file", {"content": "x"}),
        ("edit_file", {"old_text": "the", "new_text": "a"}),
        ("list_files", {}),
        ("search_files", {"pattern": "password"}),
    ],
)
def test_every_way_out_is_refused_as_data(tool_name: str, extra: dict[str, Any], ws: Path) -> None:
    outside = ws.parent / "secret.txt"
    os.symlink(outside, ws / "link")  # a link inside pointing out
    os.symlink(ws.parent, ws / "up")  # a link to a folder outside
    os.symlink(ws.parent / "ghost.txt", ws / "dangling")  # a link out to a file not yet there
    tools = registry(ws)
    for path in (
        "../secret.txt",
        "src/../../secret.txt",
        str(outside),
        "link",
        "up/secret.txt",
        "dangling",
        "/etc/passwd",
    ):
        out = call(tools, tool_name, path=path, **extra)
        assert out.startswith("ERROR: OutsideWorkspace:"), (path, out)
    assert outside.read_text() == "the password" and not (ws.parent / "ghost.txt").exists()


def test_links_inside_pointing_inside_and_absolute_paths_inside_are_fine(ws: Path) -> None:
    os.symlink("src/app.py", ws / "alias.py")
    os.symlink("src", ws / "code")
    tools = registry(ws)
    assert call(tools, "read_file", path="alias.py").startswith("SUCCESS: def f()")
    assert call(tools, "read_file", path="code/app.py").startswith("SUCCESS: def f()")
    assert call(tools, "read_file", path=str(ws / "README")) == "SUCCESS: hello\n"
    assert call(tools, "write_file", path="code/new.py", content="x").startswith("SUCCESS")
    assert (ws / "src/new.py").read_text() == "x"


def test_a_missing_workspace_is_a_result_not_an_exception(tmp_path: Path) -> None:
    out = call(registry(tmp_path / "gone"), "read_file", path="a.txt")
    assert out == (
        "ERROR: WorkspaceMissing: the workspace directory 'gone' does not exist; no file can be "
        "read or written and no command run until it is created."
    )


# -- binary and huge files ------------------------------------------------------------------


def test_binary_and_huge_files_are_refused_with_size_and_limit(ws: Path) -> None:
    (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (ws / "latin1.txt").write_bytes("café".encode("latin-1"))
    (ws / "huge.log").write_text("line\n" * 300)
    tools = registry(ws, file_bytes=1000)
    assert call(tools, "read_file", path="logo.png") == (
        "ERROR: BinaryFile: 'logo.png' is a binary file (11 bytes), not UTF-8 text; read_file "
        "works on text files only."
    )
    assert call(tools, "edit_file", path="latin1.txt", old_text="caf", new_text="x").startswith(
        "ERROR: BinaryFile: 'latin1.txt'"
    )
    huge = call(tools, "read_file", path="huge.log")
    assert huge.startswith(
        "ERROR: FileTooLarge: 'huge.log' is 1,500 bytes, over the 1,000-byte limit of read_file"
    )
    assert "larger than the limit skipped" in call(tools, "search_files", pattern="line")


def test_long_reads_are_cut_with_where_to_read_on(ws: Path) -> None:
    (ws / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    (ws / "wide.txt").write_text("x" * 500 + "\nend\n")
    tools = registry(ws, read_bytes=100)
    first = call(tools, "read_file", path="long.txt")
    assert first.startswith("SUCCESS: line 1\n") and "line 13\n" in first and "line 14" not in first
    assert first.endswith(
        "[lines 1-13 of 100 shown: the file is 792 bytes and read_file returns at most 2,000 "
        "lines and 100 bytes at once; read on with offset=14]"
    )
    wide = call(tools, "read_file", path="wide.txt")
    assert wide.startswith("SUCCESS: " + "x" * 100 + "\n[lines 1-1 of 2 shown")
    assert "line 1 is 501 bytes and only its first 100 are shown" in wide


# -- the shell ------------------------------------------------------------------------------


def test_shell_runs_in_the_workspace_with_a_minimal_environment(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    out = call(registry(ws), "shell", command="pwd; ls src; echo oops >&2; env; exit 3")
    assert out.startswith(f"SUCCESS: exit code 3\n--- stdout ---\n{ws.resolve()}\napp.py\n")
    assert out.endswith("--- stderr ---\noops\n")
    assert "sk-secret" not in out and f"HOME={ws.resolve()}" in out
    env = shell_environment(ws, {"CI": "1"})
    assert set(env) == {"PATH", "HOME", "LANG", "TERM", "NO_COLOR", "PAGER", "CI"}
    assert call(registry(ws), "shell", command="true") == "SUCCESS: exit code 0\n(no output)"


def alive(stat: Path) -> bool:
    try:
        return stat.read_text().split()[2] != "Z"  # a zombie is dead, waiting to be reaped
    except FileNotFoundError:
        return False


def test_shell_stops_at_its_timeout_and_cuts_long_output(ws: Path) -> None:
    tools = registry(ws, shell_timeout=0.3, output_bytes=100)
    late = call(tools, "shell", command="echo started; sleep 30 & echo $! > bg.pid; sleep 30")
    assert late.startswith(
        "ERROR: CommandTimedOut: the command did not finish in 0.3 seconds and was killed with "
        "every process it started. Output so far:\n--- stdout ---\nstarted"
    )
    background = Path("/proc", (ws / "bg.pid").read_text().strip(), "stat")
    deadline = time.monotonic() + 5
    while alive(background):
        assert time.monotonic() < deadline, "the background process outlived the call"
        time.sleep(0.01)
    long = call(tools, "shell", command="seq 1 2000")
    assert long.startswith("SUCCESS: exit code 0\n--- stdout ---\n1\n2\n")
    assert "[... 8,793 bytes of stdout cut: it was 8,893 bytes and shell keeps 100" in long
    assert long.endswith("1999\n2000\n")


# -- the builder ----------------------------------------------------------------------------


def test_the_builder_adds_the_tools_with_schemas_and_asks_before_writes(ws: Path) -> None:
    builder = AgentBuilder("t").workspace(ws)
    assert builder.tools.names() == [
        "read_file",
        "list_files",
        "search_files",
        "write_file",
        "edit_file",
        "shell",
    ]
    for schema in builder.tools.schemas():
        assert schema.input_schema["additionalProperties"] is False
        assert schema.description and str(ws) not in schema.description
    edit = builder.tools.get("edit_file")
    assert edit is not None and edit.schema["required"] == ["path", "old_text", "new_text"]
    reads = [t.name for t in builder.tools if t.idempotent]
    assert reads == ["read_file", "list_files", "search_files"]
    assert builder._approval_required == ["write_file", "edit_file", "shell"]
    quiet = AgentBuilder("t").workspace(ws, approve_writes=False, shell=False, prefix="ws_")
    assert "ws_shell" not in quiet.tools and quiet._approval_required == []
    with pytest.raises(BuildError, match="prefix="):
        AgentBuilder("t").workspace(ws).workspace(ws)
    with pytest.raises(BuildError, match="shell_timeout must be a positive number"):
        WorkspaceLimits(shell_timeout=0)


class ByStep:
    """An LLM whose n-th answer is for the n-th step in history (a resumed run gets the same)."""

    def __init__(self, *responses: LlmResponse) -> None:
        self.responses = responses

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        return self.responses[len({e.step for e in memory.history})]


SCRIPT = (
    LlmResponse.tool_call("read_file", {"path": "src/app.py"}),
    LlmResponse.tool_call(
        "edit_file",
        {
            "path": "src/app.py",
            "old_text": "def g():\n    return 1",
            "new_text": "def g():\n    return 2",
        },
    ),
    LlmResponse.tool_call("shell", {"command": "grep -c 'return 2' src/app.py"}),
    LlmResponse.final_answer(LONG),
)


def coder(ws: Path, **options: Any):  # type: ignore[no-untyped-def]
    def make(task: str) -> AgentBuilder:
        return (
            AgentBuilder(task)
            .llm(ByStep(*SCRIPT))
            .config(AgentConfig(reflect_every_n_steps=0))
            .workspace(ws, **options)
        )

    return make


def observations(db: Path, run_id: str) -> list[str]:
    memory, _ = AgentMemory.rebuild(SQLiteEventStore(db), run_id)
    return [e.observation for e in memory.history]


def test_an_edit_waits_for_approval_then_runs_and_replays(ws: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    make = coder(ws)
    with pytest.raises(HumanInputRequired) as waiting:
        make("fix").store(db).run_id("r").build().run()
    assert [r.call.name for r in waiting.value.requests] == ["edit_file"]
    assert AgentMemory.rebuild(SQLiteEventStore(db), "r")[1] == State.WaitingForHuman
    assert "return 2" not in (ws / "src/app.py").read_text()  # nothing written before a yes
    decide(db, "r", "approved")
    with pytest.raises(HumanInputRequired):
        resume_run(db, "r", make)  # the shell asks too
    assert [r.call.name for r in pending_requests(db, "r")] == ["shell"]
    decide(db, "r", "approved")
    assert resume_run(db, "r", make) == LONG
    assert observations(db, "r")[1:] == [
        "SUCCESS: replaced 1 occurrence in 'src/app.py' at line 5; it is now 46 bytes.",
        "SUCCESS: exit code 0\n--- stdout ---\n1\n",
    ]
    shutil.rmtree(ws)
    report = replay_run(db, "r", make)
    assert report.identical, str(report)


def test_a_coding_run_replays_and_branches_with_the_workspace_deleted(
    ws: Path, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    make = coder(ws, approve_writes=False, approve_shell=False)
    engine = make("fix").store(db).run_id("r").build()
    assert engine.run() == LONG
    seen = observations(db, "r")
    assert seen[0].startswith("SUCCESS: def f():") and seen[2].endswith("stdout ---\n1\n")
    assert (ws / "src/app.py").read_text().endswith("def g():\n    return 2\n")
    shutil.rmtree(ws)
    report = replay_run(db, "r", make)
    assert report.identical, str(report)
    assert replay_run(db, "r").identical  # the recorded definition alone
    last_ask = max(e.seq for e in SQLiteEventStore(db).read("r") if e.kind == "LlmRequested")
    other = "Fixed it another way, and nothing else was touched."
    branch = branch_run(
        db, "r", last_ask - 1, llm_response=LlmResponse.final_answer(other), builder=make
    )
    assert (branch.status, branch.answer) == ("done", other)
    assert not ws.exists()
