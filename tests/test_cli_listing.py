"""The command line as a user meets it: options anywhere, --version, listings from the catalog as
tables, JSON or CSV, filters, search, stats, the trace and memory views, and what branch and
replay report. In-process (`main`), on real log files."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from agentsm import (
    AgentBuilder,
    AgentFailed,
    AgentMemory,
    HumanInputRequired,
    LlmResponse,
    MockLlmCaller,
    RunContext,
    build_transition_table,
)
from agentsm.catalog import summary_of_facts
from agentsm.tables import Cell, Column, render_table
from agentsm.trace import Trace, decode
from eventstore import NewEvent, SQLiteEventStore
from replay.cli import COMMANDS, main
from tests.scenarios import LONG, SCENARIOS, base

Capture = pytest.CaptureFixture[str]


def record(db: Path, builder: AgentBuilder) -> str:
    engine = builder.store(str(db)).build()
    try:
        engine.run()
    except (AgentFailed, HumanInputRequired):
        pass
    engine.store.close()
    return engine.run_id


@pytest.fixture
def log(tmp_path: Path) -> dict[str, str]:
    """A log with a done run, a failed one (max steps) and one waiting for a human."""
    db = tmp_path / "runs.db"
    runs = {name: record(db, SCENARIOS[name]()) for name in ("parallel", "max_steps", "failures")}
    runs["db"] = str(db)
    return runs


def run(capsys: Capture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    shown = capsys.readouterr()
    return code, shown.out, shown.err


def test_version_and_options_before_or_after_the_command(
    log: dict[str, str], capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and re.fullmatch(r"agentsm, version \d+\.\d+\.\d+\n", out)
    before = run(capsys, "--db", log["db"], "runs", "--json")
    after = run(capsys, "runs", "--json", "--db", log["db"])
    monkeypatch.setenv("AGENTSM_DB", log["db"])
    from_env = run(capsys, "runs", "--json")
    assert before == after == from_env and before[0] == 0
    code, _, err = run(capsys, "runs", "--limit", "many")
    assert code == 2 and err.count("\n") == 1 and "agentsm runs --help" in err
    code, out, _ = run(capsys)
    assert code == 0 and out.startswith("Usage: agentsm") and "search" in out
    code, _, err = run(capsys, "runn")
    assert (
        code == 2
        and err == "agentsm: No such command 'runn'. Did you mean 'runs'? see agentsm --help.\n"
    )


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(command: str, capsys: Capture) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0 and f"example: agentsm {command}" in out and "--db" in out


def test_runs_lists_the_catalog_as_json_and_csv_the_same_as_the_fold(
    log: dict[str, str], capsys: Capture
) -> None:
    code, out, _ = run(capsys, "runs", "--db", log["db"], "--json")
    listed = {r["run_id"]: r for r in json.loads(out)}
    assert code == 0 and set(listed) == {log["parallel"], log["max_steps"], log["failures"]}
    with SQLiteEventStore(log["db"]) as store:
        for run_id, row in listed.items():
            folded = summary_of_facts(decode(e) for e in store.read(run_id))
            assert (row["steps"], row["input_tokens"], row["output_tokens"]) == (
                folded.steps,
                folded.input_tokens,
                folded.output_tokens,
            )
            assert (row["answer"], row["error"]) == (folded.answer, folded.error)
    code, out, _ = run(capsys, "runs", "--db", log["db"], "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["run_id"] for r in rows] == list(listed) and rows[0]["status"] == "done"
    code, out, _ = run(capsys, "runs", "--db", log["db"], "--csv", "--status", "aborted")
    assert out.startswith("run_id,task,status,steps,") and out.count("\n") == 1
    code, out, _ = run(capsys, "runs", "--db", log["db"], "--json", "--status", "aborted")
    assert json.loads(out) == []


def test_every_csv_shows_control_characters_as_escapes_and_json_keeps_them(
    tmp_path: Path, capsys: Capture
) -> None:
    db = tmp_path / "runs.db"
    answer = "The screen \x1b[2Jwas cleared, which is long enough to be accepted."
    run_id = record(
        db, AgentBuilder("clear").llm(MockLlmCaller([LlmResponse.final_answer(answer)]))
    )
    code, out, _ = run(capsys, "runs", "--db", str(db), "--json")
    assert json.loads(out)[0]["answer"] == answer
    code, out, _ = run(capsys, "runs", "--db", str(db), "--csv")
    assert next(csv.DictReader(io.StringIO(out)))["answer"] == answer.replace("\x1b", "\\x1b")
    code, out, _ = run(
        capsys, "show", run_id, "--db", str(db), "--csv", "--kind", "FinalAnswerProduced"
    )
    assert "\\x1b[2J" in next(csv.DictReader(io.StringIO(out)))["data"]
    for command in (["runs"], ["search", "screen"], ["show", run_id]):
        code, out, err = run(capsys, *command, "--db", str(db), "--json", "--csv")
        assert code == 2 and out == "" and err.count("\n") == 1
        assert "give --json or --csv, not both" in err


def test_runs_never_reads_a_log(
    log: dict[str, str], capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("runs read a run's facts")

    monkeypatch.setattr(SQLiteEventStore, "read", refuse)
    code, out, _ = run(capsys, "runs", "--db", log["db"], "--status", "error", "--since", "1h")
    assert code == 0 and log["max_steps"] in out and log["parallel"] not in out


def test_runs_filters(log: dict[str, str], capsys: Capture) -> None:
    def ids(*filters: str) -> list[str]:
        code, out, err = run(capsys, "runs", "--db", log["db"], "--json", *filters)
        assert code == 0, err
        return [r["run_id"] for r in json.loads(out)]

    assert ids("--status", "error") == [log["max_steps"], log["failures"]]
    assert ids("--status", "failed", "--task", "max") == [log["max_steps"]]
    assert ids("--status", "done", "--task", "PARALLEL") == [log["parallel"]]
    assert ids("-n", "1") == [log["failures"]]  # the newest
    assert ids("--since", "2h") == ids() and ids("--since", "2999-01-01") == []
    assert ids("--model", "no-such-model") == []
    code, out, _ = run(capsys, "runs", "--db", log["db"], "--task", "nothing like it")
    assert code == 0 and out.startswith("No runs match in ")
    code, _, err = run(capsys, "runs", "--db", log["db"], "--since", "yesterday")
    assert code == 2 and "give a duration (30m, 2h, 1d, 1w)" in err and err.count("\n") == 1
    code, _, err = run(capsys, "runs", "--db", log["db"], "--status", "erorr")
    assert code == 2 and "use one of" in err and "error" in err


def test_an_ambiguous_prefix_is_named_as_such(tmp_path: Path, capsys: Capture) -> None:
    db = tmp_path / "runs.db"
    for run_id in ("abc1", "abc2"):
        record(db, SCENARIOS["parallel"]().run_id(run_id))
    code, _, err = run(capsys, "show", "abc", "--db", str(db))
    assert code == 2 and "abc1" in err and "abc2" in err and "Closest" not in err
    assert run(capsys, "show", "abc2", "--db", str(db))[0] == 0


def test_tables_fit_the_width_keep_rows_on_one_line_and_are_plain_unstyled() -> None:
    columns = [Column("id"), Column("answer", flexible=True), Column("model", drop=1)]
    rows = [["r1", "line one\nline two " + "x" * 200, "gpt-4o"], ["r2", "short", ""]]
    for width in (30, 50, 80):
        lines = render_table(columns, rows, width=width).splitlines()
        assert len(lines) == 3 and all(len(line) <= width for line in lines)
        assert lines[1].startswith("r1") and "…" in lines[1] and "\\n" in lines[1]
    assert "model" not in render_table(columns, rows, width=16).splitlines()[0]
    wide = render_table(columns, rows)  # piped: nothing cut
    assert "x" * 200 in wide and "…" not in wide and "\033[" not in wide
    styled = render_table(["s"], [[Cell("done", "green")]], styled=True)
    assert "\033[" in styled and "\033[" not in render_table(["s"], [[Cell("done", "green")]])


def test_the_library_trace_and_show_use_the_same_table(
    log: dict[str, str], capsys: Capture
) -> None:
    with SQLiteEventStore(log["db"]) as store:
        trace = Trace.load(store, log["parallel"])
    code, out, _ = run(capsys, "show", log["parallel"], "--db", log["db"])
    assert code == 0 and trace.format(None) in out
    assert all(len(line) <= 60 for line in trace.format(60).splitlines())


def test_show_filters_by_kind_and_step_and_shows_facts_in_full(
    log: dict[str, str], capsys: Capture
) -> None:
    db = ["--db", log["db"]]
    code, out, _ = run(capsys, "show", log["parallel"], *db, "--kind", "ToolExecuted", "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 3 and {r["fact"] for r in rows} == {"ToolExecuted"}
    code, out, _ = run(capsys, "show", log["parallel"], *db, "--step", "2", "--json")
    assert code == 0 and {json.loads(line)["step"] for line in out.splitlines()} == {2}
    code, out, _ = run(
        capsys, "show", log["parallel"], *db, "--kind", "FinalAnswerProduced", "--full"
    )
    assert code == 0 and f'"content": "{LONG}"' in out
    code, _, err = run(capsys, "show", log["parallel"], *db, "--kind", "ToolRan")
    assert code == 2 and "ToolExecuted" in err


def test_memory_messages_show_the_conversation_the_llm_was_sent(
    log: dict[str, str], capsys: Capture
) -> None:
    with SQLiteEventStore(log["db"]) as store:
        asked = [e.seq for e in store.read(log["parallel"]) if e.kind == "LlmRequested"]
        memory, _ = AgentMemory.rebuild(store, log["parallel"])
    db = ["--db", log["db"]]
    code, out, _ = run(capsys, "memory", log["parallel"], *db, "--at", str(asked[1]), "--messages")
    assert code == 0 and f"as sent by the LLM request at seq {asked[1]}" in out
    assert "[system]" in out and "[user]" in out and "[tool]" in out
    code, out, _ = run(capsys, "memory", log["parallel"], *db, "--messages", "--json")
    assert json.loads(out) == memory.build_messages()


def test_search_finds_tasks_observations_and_answers(log: dict[str, str], capsys: Capture) -> None:
    code, out, err = run(capsys, "search", "nope", "--db", log["db"])
    assert code == 0 and log["parallel"] in out and "[nope]" in out
    assert re.search(r"\d+ facts? in 1 run\n", err)
    code, out, _ = run(capsys, "search", "long enough", "--db", log["db"], "--json")
    hits = json.loads(out)
    assert {h["kind"] for h in hits} >= {"FinalAnswerProduced", "LlmResponded"}
    code, out, _ = run(capsys, "search", "zebra", "--db", log["db"])
    assert code == 0 and out.startswith("Nothing matches 'zebra'")


def test_n_is_at_most_n_everywhere_zero_is_all_and_negative_is_refused(
    log: dict[str, str], capsys: Capture
) -> None:
    code, out, _ = run(capsys, "search", "long enough", "--db", log["db"], "--json")
    every = json.loads(out)
    assert len(every) > 1
    for n, expected in (("0", every), ("1", every[:1])):
        code, out, err = run(capsys, "search", "long enough", "--db", log["db"], "--json", "-n", n)
        assert code == 0 and json.loads(out) == expected, err
    code, out, _ = run(capsys, "runs", "--db", log["db"], "--json", "-n", "0")
    assert len(json.loads(out)) == 3
    tail = ["tail", log["parallel"], "--db", log["db"], "--json"]
    code, out, _ = run(capsys, *tail)
    facts = out.splitlines()
    for n, expected in (("0", facts), ("2", facts[:2])):
        code, out, err = run(capsys, *tail, "-n", n)
        assert code == 0 and out.splitlines() == expected, err
    for argv in (
        ["search", "long enough", "-n", "-2"],
        ["runs", "-n", "-1"],
        ["tail", log["parallel"], "-n", "-1"],
    ):
        code, out, err = run(capsys, *argv, "--db", log["db"])
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert "-n" in err and ">=0" in err, err


def test_stats_count_statuses_tools_tokens_and_errors(log: dict[str, str], capsys: Capture) -> None:
    code, out, _ = run(capsys, "stats", "--db", log["db"], "--since", "1d", "--json")
    figures = json.loads(out)
    assert code == 0 and figures["runs"] == 3
    assert figures["status"] == {"failed": 2, "done": 1}
    assert figures["tools"]["explode"]["failures"] >= 1
    assert any(key.startswith("tool RuntimeError") for key in figures["errors"])
    assert any(key.startswith("run ") for key in figures["errors"])  # the max-steps failure
    assert figures["input_tokens"] > 0 and figures["slowest_tools"]
    code, out, _ = run(capsys, "stats", "--db", log["db"])
    assert code == 0 and out.startswith("3 runs in ") and "tools: " in out


def test_branch_reports_a_refused_answer_a_moved_point_and_the_live_llm_it_needs(
    tmp_path: Path, capsys: Capture
) -> None:
    db = str(tmp_path / "runs.db")
    run_id = record(tmp_path / "runs.db", SCENARIOS["parallel"]())
    with SQLiteEventStore(db) as store:
        before = next(e.seq for e in store.read(run_id) if e.kind == "StepStarted")
    code, out, err = run(
        capsys, "branch", run_id, "--db", db, "--at", str(before), "--answer", "Paris."
    )
    lines = out.splitlines()
    assert code == 2  # stopped: it needs what it was not allowed
    assert re.fullmatch(r"  stopped \(state Planning\): needs a live LLM at seq \d+", lines[1])
    assert lines[2] == (
        f"  from {run_id} at seq {before - 1} (seq {before} asked for: a branch starts after a "
        f"complete transition, and seq {before - 1} is the last one at or before it)"
    )
    assert re.fullmatch(r"  given   seq \d+  LLM call \(plan\): the answer given", lines[3])
    assert re.fullmatch(
        r"  needed  seq \d+  LLM call \(plan\): its messages differ from the parent's; "
        r"pass --live and --builder",
        lines[4],
    )
    assert "was refused" in err and "recording" not in err
    with SQLiteEventStore(db) as store:
        branch = store.run(lines[0])
        assert branch.status == "stopped"  # no worker takes it up; `agentsm resume` may
        kinds = [e.kind for e in store.read(branch.run_id)]
        assert "LlmRequested" not in kinds[-2:]  # stopped before the request: nothing under way
    assert run(capsys, "replay", branch.run_id, "--db", db)[0] == 0  # a stopped branch replays


@pytest.mark.parametrize(
    ("option", "observation", "success"),
    [
        ("--tool-result", "SUCCESS: declined by bank", True),
        ("--tool-error", "ERROR: ToolError: declined by bank", False),
    ],
)
def test_a_branch_with_another_tool_outcome_reuses_the_same_calls_and_stops_at_the_llm(
    tmp_path: Path, capsys: Capture, option: str, observation: str, success: bool
) -> None:
    db = str(tmp_path / "runs.db")
    run_id = record(tmp_path / "runs.db", SCENARIOS["parallel"]())
    with SQLiteEventStore(db) as store:
        before = next(e.seq for e in store.read(run_id) if e.kind == "ToolCallStarted") - 1
    code, out, err = run(
        capsys, "branch", run_id, "--db", db, "--at", str(before), option, "declined by bank"
    )
    assert code == 2, err
    new_id, said, start, *effects = out.splitlines()
    assert said.startswith("  stopped (state Planning): needs a live LLM at seq ")
    assert start == f"  from {run_id} at seq {before}"  # a transition: not moved
    assert [line.split()[0] for line in effects] == ["given", "reused", "reused", "needed"]
    assert 'fetch({"url": "u"}) (the parent\'s call at seq ' in effects[1]
    assert effects[3].endswith("pass --live and --builder")
    with SQLiteEventStore(db) as store:
        executed = [e.fact for e in Trace.load(store, new_id) if e.event == "ToolExecuted"]
    assert (executed[0].observation, executed[0].success) == (observation, success)
    assert run(capsys, "replay", new_id, "--db", db)[0] == 0  # the branch replays identical
    as_json = json.loads(
        run(capsys, "branch", run_id, "--db", db, "--at", str(before), option, "x", "--json")[1]
    )
    assert as_json["status"] == "stopped" and not as_json["moved"]
    assert [e["source"] for e in as_json["effects"]] == ["given", "reused", "reused", "needed"]
    assert as_json["needs"][0].startswith("needs a live LLM at seq ")
    err = run(
        capsys,
        "branch",
        run_id,
        "--db",
        db,
        "--at",
        str(before),
        "--tool-result",
        "a",
        "--tool-error",
        "b",
    )[2]
    assert "not both" in err


def test_a_branch_that_ends_in_error_exits_non_zero(tmp_path: Path, capsys: Capture) -> None:
    db = str(tmp_path / "runs.db")
    run_id = record(tmp_path / "runs.db", SCENARIOS["parallel"]())
    code, out, _ = run(
        capsys, "--db", db, "branch", run_id, "--at", "2", "--config", '{"max_steps": 0}'
    )
    assert code == 1 and out.splitlines()[1].startswith("  failed (state Error): ")


def test_a_branch_runs_real_tools_only_with_live_tools(tmp_path: Path, capsys: Capture) -> None:
    db = str(tmp_path / "runs.db")
    run_id = record(tmp_path / "runs.db", SCENARIOS["parallel"]())
    agent = tmp_path / "agent.py"
    agent.write_text(
        "from tests.scenarios import SCENARIOS\n"
        "from agentsm import LlmResponse, MockLlmCaller\n"
        "def make(task):\n"
        "    return SCENARIOS['parallel']().llm(MockLlmCaller([\n"
        "        LlmResponse.tool_call('lookup', {'key': 'zz'}),\n"
        f"        LlmResponse.final_answer({LONG!r})]))\n"
    )
    common = ["--db", db, "branch", run_id, "--at", "2", "--live", "--builder", f"{agent}:make"]
    code, out, err = run(capsys, *common)
    child, said, _, *effects = out.splitlines()
    with SQLiteEventStore(db) as store:
        kinds = [e.kind for e in store.read(child)]
    assert code == 2 and "ToolExecuted" not in kinds  # no result made up for it
    assert said.startswith(
        '  stopped (state Acting): needs the tool lookup({"key": "zz"}) run live'
    )
    assert effects[0].startswith("  live    seq ") and "LLM call (plan)" in effects[0]
    assert effects[1].endswith(
        'the parent ran lookup({"key": "a"}) there; pass --live-tools and --builder'
    )
    code, out, err = run(capsys, *common, "--live-tools")
    with SQLiteEventStore(db) as store:
        executed = [e.payload for e in store.read(out.split()[0]) if e.kind == "ToolExecuted"]
    assert code == 0 and "value of zz" in executed[0]
    assert re.search(r'^  live    seq \d+  lookup\(\{"key": "zz"\}\): the parent ran', out, re.M)


def verify(ctx: RunContext) -> str:
    return "Verified"


def test_replay_names_runs_that_need_the_builder_apart_from_divergences(
    tmp_path: Path, capsys: Capture
) -> None:
    db = tmp_path / "runs.db"
    table = (
        build_transition_table()
        .without_rows(("Observing", "Continue"))
        .with_rows({("Observing", "Continue"): "Verifying", ("Verifying", "Verified"): "Planning"})
    )
    script = [LlmResponse.tool_call("lookup", {"key": "a"}), LlmResponse.final_answer(LONG)]
    custom = record(db, base("verify", script).transitions(table).handler("Verifying", verify))
    code, out, _ = run(capsys, "replay", "--all", "--db", str(db))
    assert code == 2 and "DIVERGED" not in out
    assert f"{custom}  needs --builder: custom state Verifying" in out
    assert "Not replayed: only your agent has" in out
    assert "1 run replayed: 0 identical, 0 diverged, 1 need --builder" in out
    plain = record(db, AgentBuilder("plain").llm(MockLlmCaller([LlmResponse.final_answer(LONG)])))
    code, out, _ = run(capsys, "replay", plain, "--db", str(db))
    assert code == 0 and f"{plain}  identical" in out


def test_long_output_goes_through_a_pager_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    import os
    import shutil

    import click

    from replay.cli import common as cli_common

    paged: list[str] = []
    monkeypatch.setattr(click, "echo_via_pager", lambda text: paged.append(text))
    monkeypatch.setattr(shutil, "get_terminal_size", lambda: os.terminal_size((80, 10)))
    cli_common.echo("\n".join(map(str, range(50))))
    assert not paged and capsys.readouterr().out.count("\n") == 50  # piped: printed as is
    monkeypatch.setattr(cli_common, "terminal_width", lambda stream=None: 80)
    cli_common.echo("short\ntext")
    cli_common.echo("\n".join(map(str, range(50))))
    assert len(paged) == 1 and paged[0].startswith("0\n1\n") and "short" in capsys.readouterr().out


def test_interrupted_runs_are_told_apart_before_the_limit(tmp_path: Path, capsys: Capture) -> None:
    """An interrupted run older than many live ones is still listed by `--status interrupted -n`."""
    db = tmp_path / "runs.db"
    store = SQLiteEventStore(db)
    event = NewEvent("RunStarted", "{}", "{}", 1.0)
    store.create_run("gone", "left by a dead worker", events=[event], status="running")
    for i in range(5):  # newer runs, driven by this (live) process
        store.create_run(f"live{i}", "going on", events=[event], status="running", claim=True)
    code, out, _ = run(capsys, "--db", str(db), "runs", "--status", "interrupted", "-n", "1")
    assert code == 0 and "gone" in out and "live" not in out
    store.close()
