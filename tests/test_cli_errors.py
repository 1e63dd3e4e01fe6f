"""Bad input at the command line: one line on stderr saying what was wrong and what to do,
exit code 2, the traceback only under --debug, and nothing recorded changed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agentsm import AgentBuilder, AgentConfig, AgentMemory, LlmResponse, MockLlmCaller
from eventstore import SQLiteEventStore
from replay.cli import main
from replay.recording import Recording


def say(text: str) -> str:
    """Echo a text."""
    return text


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, str, int]:
    path = tmp_path / "runs.db"
    engine = (
        AgentBuilder("say hello")
        .llm(
            MockLlmCaller(
                [
                    LlmResponse.tool_call("say", {"text": "hello"}, id="c1"),
                    LlmResponse.final_answer("I said hello to everyone."),
                ]
            )
        )
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(say)
        .store(path)
        .build()
    )
    engine.run()
    return str(path), engine.run_id, engine.seq


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the command, expect exit code 2 and exactly one line on stderr; return it."""
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own refusals
        code = int(e.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def test_branch_at_out_of_range_is_refused_naming_the_range(
    db: tuple[str, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, last = db
    for at in ("0", "-3", str(last + 1), "999"):
        err = fails(capsys, "--db", path, "branch", run_id, "--at", at, "--answer", "Other.")
        assert f"has facts 1..{last}" in err and f"from 1 to {last}" in err
    assert [r.run_id for r in SQLiteEventStore(path).runs()] == [run_id]  # nothing branched
    err = fails(capsys, "--db", path, "memory", run_id, "--at", str(last + 5))
    assert f"has facts 1..{last}" in err


def test_malformed_values_name_the_option_and_the_form(
    db: tuple[str, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, _ = db
    err = fails(capsys, "--db", path, "branch", run_id, "--at", "3", "--config", "{max_steps: 2")
    assert "--config is not valid JSON" in err and "max_steps" in err
    err = fails(
        capsys, "--db", path, "branch", run_id, "--at", "3", "--config", '{"max_steps": "many"}'
    )
    assert "--config is not a valid AgentConfig: max_steps:" in err
    err = fails(capsys, "--db", path, "modify", run_id, "--args", "[1, 2]")
    assert "--args must be a JSON object" in err
    err = fails(capsys, "--db", path, "import", str(Path(path).parent / "missing.jsonl"))
    assert "missing.jsonl" in err and "No such file" in err
    err = fails(capsys, "--db", path, "branch", run_id)
    assert "--at" in err and "agentsm branch --help" in err
    err = fails(capsys, "--db", path, "show", "nope")
    assert "Unknown run id 'nope'" in err
    err = fails(capsys, "--db", path, "replay")
    assert "RUN id, or --all" in err


def test_backup_of_a_postgresql_log_points_at_copy(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://agentsm@127.0.0.1:1/none"
    err = fails(capsys, "--db", url, "backup", "copy.db")
    assert "backup copies SQLite logs; for this log use: agentsm copy --to copy.db" in err


@pytest.mark.parametrize("command", ["graph", "timeline", "family"])
def test_pictures_without_matplotlib_say_how_to_install_it(
    command: str,
    db: tuple[str, str, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, run_id, _ = db
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.font_manager"):
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    out = str(tmp_path / "picture.svg")
    err = fails(capsys, "--db", path, command, run_id, "--out", out)
    assert "needs matplotlib: pip install 'agentsm[pictures]'" in err
    assert not Path(out).exists()


def test_a_range_that_selects_nothing_is_refused_naming_the_range(
    db: tuple[str, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, last = db
    for after in (str(last), "100"):
        err = fails(capsys, "--db", path, "tail", run_id, "--after", after)
        assert f"facts 1..{last}" in err and f"--after from 0 to {last - 1}" in err
    assert main(["--db", path, "tail", run_id, "--after", str(last - 1), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["seq"] == last
    steps = {e.step for e in Recording.load(SQLiteEventStore(path), run_id).entries}
    err = fails(capsys, "--db", path, "show", run_id, "--step", "99")
    assert f"steps {min(steps)}..{max(steps)}; --step 99 is not one of them" in err
    assert main(["--db", path, "show", run_id, "--step", str(max(steps)), "--csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) > 1


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(
    db: tuple[str, str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, _ = db
    broken = tmp_path / "broken_agent.py"
    broken.write_text("def make(task):\n    raise RuntimeError('the agent\\nis broken')\n")
    argv = ["--db", path, "replay", run_id, "--builder", f"{broken}:make"]
    err = fails(capsys, *argv)
    assert "unexpected RuntimeError: the agent is broken" in err and "--debug" in err
    for debug in (["--debug", *argv], [*argv, "--debug"]):
        assert main(debug) == 2
        err = capsys.readouterr().err
        assert "Traceback" in err and "raise RuntimeError" in err
        assert err.splitlines()[-1].startswith("agentsm: unexpected RuntimeError")
    wrong = tmp_path / "wrong_agent.py"
    wrong.write_text("def make(task):\n    return 42\n")
    err = fails(capsys, "--db", path, "replay", run_id, "--builder", f"{wrong}:make")
    assert "make(task) returned int, not an AgentBuilder" in err
    assert "unexpected AttributeError" not in err


def test_branch_config_changes_the_given_fields_and_keeps_the_recorded_others(
    db: tuple[str, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, _ = db
    err = fails(capsys, "--db", path, "branch", run_id, "--at", "3", "--config", '{"max_step": 2}')
    assert "no field 'max_step' (did you mean 'max_steps'?)" in err and "max_steps, " in err
    assert err.count("\n") == 1 and "pydantic" not in err
    assert main(["--db", path, "branch", run_id, "--at", "3", "--config", '{"max_steps": 7}']) == 0
    branch = capsys.readouterr().out.split()[0]
    store = SQLiteEventStore(path)
    parent, _ = AgentMemory.rebuild(store, run_id)
    child, _ = AgentMemory.rebuild(store, branch)
    assert parent.config.reflect_every_n_steps == child.config.reflect_every_n_steps == 0
    assert child.config == parent.config.model_copy(update={"max_steps": 7})


def transfer(amount: int, to: str) -> str:
    """Move money."""
    return f"sent {amount} to {to}"


def waiting_run(path: Path, calls: int = 1) -> str:
    """A run waiting for approval of `calls` transfers (ids t1, t2, ...)."""
    from agentsm import HumanInputRequired, ToolCall

    planned = [
        ToolCall(name="transfer", args={"amount": n, "to": "ann"}, id=f"t{n}")
        for n in range(1, calls + 1)
    ]
    engine = (
        AgentBuilder("pay ann")
        .llm(MockLlmCaller([LlmResponse.tool_calls(planned)]))
        .tool(transfer)
        .require_approval("transfer")
        .store(path)
        .build()
    )
    with pytest.raises(HumanInputRequired):
        engine.run()
    return engine.run_id


def test_modify_refuses_arguments_that_break_the_tool_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    run_id = waiting_run(path)
    before = SQLiteEventStore(path).read(run_id)
    err = fails(capsys, "--db", str(path), "modify", run_id, "--args", '{"amount": 9}')
    assert "args.to is required" in err and "replaces all of the call's arguments" in err
    assert SQLiteEventStore(path).read(run_id) == before  # nothing recorded
    assert main(["--db", str(path), "modify", run_id, "--args", '{"amount": 9, "to": "bo"}']) == 0


def test_a_call_number_no_longer_waiting_lists_the_calls_still_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    run_id = waiting_run(path, calls=2)
    assert main(["--db", str(path), "approve", run_id, "--call", "#1"]) == 0
    assert "still waiting for: #1 t2" in capsys.readouterr().out  # renumbered
    err = fails(capsys, "--db", str(path), "reject", run_id, "--call", "#2")
    assert "#2 is not one of them" in err and "waiting: #1 t2 (transfer)" in err


@pytest.mark.parametrize("builder", ["", "myagent:make"])
def test_the_resume_hint_asks_for_a_builder_only_without_agentsm_builder(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    builder: str,
) -> None:
    path = tmp_path / "runs.db"
    run_id = waiting_run(path)
    monkeypatch.setenv("AGENTSM_BUILDER", builder)
    assert main(["--db", str(path), "reject", run_id]) == 0
    hint = capsys.readouterr().out.splitlines()[-1]
    assert hint.endswith(f"agentsm resume {run_id}" + ("" if builder else " --builder ..."))


def test_branch_takes_seq_for_at(
    db: tuple[str, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, _ = db
    argv = ["--db", path, "branch", run_id, "--seq", "3", "--answer", "I said hello to them all."]
    assert main(argv) == 0, capsys.readouterr().err
    assert len(SQLiteEventStore(path).runs()) == 2
    err = fails(capsys, "--db", path, "branch", run_id, "--sq", "3")
    assert "Did you mean" in err and "'--seq'" in err


def test_an_unknown_fact_kind_is_met_with_the_closest_kinds(
    db: tuple[str, str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    path, run_id, _ = db
    err = fails(capsys, "--db", path, "show", run_id, "--kind", "LlmRespnded")
    assert "--kind LlmRespnded: no such fact. Did you mean 'LlmResponded'" in err
    assert "The kinds are AnswerRejected, " in err


def test_a_file_that_is_not_an_export_is_refused_in_whole_sentences(
    db: tuple[str, str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, _ = db
    (tmp_path / "notes.txt").write_text("hello\n")
    err = fails(capsys, "--db", path, "import", str(tmp_path / "notes.txt"))
    assert "line 1: not JSON (Expecting value), where an agentsm export has one JSON" in err
    assert "?." not in err and "?;" not in err
    from replay.errors import ImportRefused

    asked = str(ImportRefused(3, "is this an export?"))
    assert asked.startswith("line 3: is this an export? Nothing of the file was imported;")
