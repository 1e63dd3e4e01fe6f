"""pytest_agentsm: `pytest --agentsm-replay LOG --agentsm-builder m:f` makes each recorded run a
test that passes when it replays identical and fails with the replay's report."""

from __future__ import annotations

import shutil
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentsm import HumanInputRequired
from eventstore import EventStore, SQLiteEventStore, open_store
from replay import export_run

from .plugin_agent import make_agent

pytest_plugins = ["pytester"]

AGENT = Path(__file__).with_name("plugin_agent.py")
TASKS = ("Find a", "Find b", "Ask about c")


@dataclass(frozen=True)
class Recorded:
    db: Path
    exports: Path
    ids: dict[str, str]  # task: run id

    def args(self, factory: str = "make_agent", *more: str) -> list[str]:
        return ["--agentsm-replay", str(self.db), "--agentsm-builder", f"{AGENT}:{factory}", *more]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """A log of three runs (two done, one waiting for a human) and a folder of their exports."""
    folder = tmp_path_factory.mktemp("recorded")
    db = folder / "runs.db"
    with SQLiteEventStore(db) as store:  # closed: the file alone holds the runs
        ids = {task: _record(store, task) for task in TASKS}
    exports = folder / "exports"
    exports.mkdir()
    with SQLiteEventStore(db, read_only=True) as store:
        for run_id in ids.values():
            (exports / f"{run_id}.jsonl").write_text("\n".join(export_run(store, run_id)) + "\n")
    return Recorded(db, exports, ids)


def _record(store: EventStore, task: str) -> str:
    engine = make_agent(task).store(store).build()
    try:
        engine.run()
    except HumanInputRequired:
        pass  # the run waits for a human
    return engine.run_id


@pytest.fixture
def here(pytester: pytest.Pytester, recorded: Recorded) -> Recorded:
    """The log and the exports copied where pytest runs, named by relative paths."""
    shutil.copy(recorded.db, pytester.path / "runs.db")
    shutil.copytree(recorded.exports, pytester.path / "exports")
    return Recorded(Path("runs.db"), Path("exports"), recorded.ids)


def test_identical_runs_pass_one_test_each_named_by_run_id_and_task(
    pytester: pytest.Pytester, here: Recorded
) -> None:
    pytester.makepyfile(test_other="def test_other():\n    pass\n")  # not collected: no paths
    result = pytester.runpytest(*here.args(), "-v")
    result.assert_outcomes(passed=3)
    for task, run_id in here.ids.items():
        result.stdout.fnmatch_lines([f"runs.db::{run_id}[[]{task}[]] PASSED*"])
    both = pytester.runpytest("test_other.py", *here.args())
    both.assert_outcomes(passed=4)  # given paths, their tests run too


def test_a_changed_prompt_fails_with_the_replay_report_and_no_traceback(
    pytester: pytest.Pytester, here: Recorded
) -> None:
    result = pytester.runpytest(*here.args("reworded"), "-k", here.ids["Find a"])
    result.assert_outcomes(failed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            f"*recorded run {here.ids['Find a']} (done): Find a*",
            f"run {here.ids['Find a']}: definition changed; behaviour diverged at seq 4",
            "definition changed at seq 1 (Idle): the definition changed: system_prompt",
            '-    "system_prompt": "Be brief.",',
            '+    "system_prompt": "Be thorough.",',
            "first divergence at seq 4 (Planning): the LLM request changed: messages",
            '-      "content": "Be brief."',
            '+      "content": "Be thorough."',
            f"FAILED runs.db::{here.ids['Find a']}[[]Find a[]] - run *: definition changed; *",
        ]
    )
    text = result.stdout.str()
    assert "Traceback" not in text and "replay_run(" not in text and ".py:" not in text


def test_an_error_of_the_builder_is_one_line(pytester: pytest.Pytester, here: Recorded) -> None:
    result = pytester.runpytest(*here.args("not_a_builder"), "--agentsm-task", "find a")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"run {here.ids['Find a']}: BuildError: --agentsm-builder '*:not_a_builder': "
            "not_a_builder(task) returned str, not an AgentBuilder; *"
        ]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("filters", "tasks"),
    [
        (["--agentsm-status", "done"], ["Find a", "Find b"]),
        (["--agentsm-status", "waiting"], ["Ask about c"]),
        (["--agentsm-status", "error"], []),
        (["--agentsm-task", "FIND"], ["Find a", "Find b"]),
        (["--agentsm-task", "b", "--agentsm-status", "done"], ["Find b"]),
        (["--agentsm-since", "0"], list(TASKS)),
        (["--agentsm-since", "1h"], list(TASKS)),
        (["--agentsm-since", "2999-01-01"], []),
        (["--agentsm-since", str(time.time() + 3600)], []),
    ],
)
def test_filters_select_the_runs(
    pytester: pytest.Pytester, here: Recorded, filters: list[str], tasks: list[str]
) -> None:
    result = pytester.runpytest(*here.args("make_agent", *filters), "--collect-only", "-q")
    listed = [line for line in result.stdout.lines if line.startswith("runs.db::")]
    assert listed == [f"runs.db::{here.ids[t]}[{t}]" for t in tasks]


def test_exports_replay_as_the_log_does(pytester: pytest.Pytester, here: Recorded) -> None:
    folder = ["--agentsm-replay", str(here.exports), "--agentsm-builder", f"{AGENT}:reworded"]
    result = pytester.runpytest(*folder, "--agentsm-status", "done", "-v")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([f"exports::{here.ids['Find a']}[[]Find a[]] FAILED*"])
    one = pytester.path / here.exports / f"{here.ids['Ask about c']}.jsonl"
    result = pytester.runpytest(
        "--agentsm-replay", str(one), "--agentsm-builder", f"{AGENT}:make_agent"
    )
    result.assert_outcomes(passed=1)


def test_junit_xml_holds_the_report(pytester: pytest.Pytester, here: Recorded) -> None:
    xml = pytester.path / "report.xml"
    result = pytester.runpytest(*here.args("reworded_for_b"), f"--junitxml={xml}")
    result.assert_outcomes(passed=2, failed=1)
    _check_junit(xml, here)


def test_xdist_workers_collect_the_same_runs(pytester: pytest.Pytester, here: Recorded) -> None:
    pytest.importorskip("xdist")
    xml = pytester.path / "report.xml"
    result = pytester.runpytest_subprocess(
        *here.args("reworded_for_b"), "-n", "2", f"--junitxml={xml}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*2 workers*", f"FAILED *{here.ids['Find b']}*"])
    _check_junit(xml, here)


def _check_junit(xml: Path, here: Recorded) -> None:
    cases = {case.get("name", ""): case for case in ET.parse(xml).getroot().iter("testcase")}
    assert sorted(cases) == sorted(f"{here.ids[t]}[{t}]" for t in TASKS)
    failure = cases[f"{here.ids['Find b']}[Find b]"].find("failure")
    assert failure is not None and failure.text is not None
    headline = f"run {here.ids['Find b']}: definition changed; behaviour diverged at seq 4"
    assert failure.get("message") == headline
    assert failure.text.startswith(headline + "\n")
    assert '+      "content": "Be thorough."' in failure.text
    assert {case.get("classname") for case in cases.values()} == {"runs.db"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--agentsm-replay", "missing.db"],
            "--agentsm-replay 'missing.db': no such file or folder*",
        ),
        (
            ["--agentsm-replay", "tests"],
            "--agentsm-replay 'tests': the folder holds no export files*",
        ),
        (["--agentsm-builder", "nowhere_at_all:make"], "--agentsm-builder 'nowhere_at_all:make'*"),
        (["--agentsm-status", "finished"], "--agentsm-status 'finished': use one of *done*"),
        (["--agentsm-since", "yesterday"], "--agentsm-since 'yesterday': give a date *"),
    ],
)
def test_unusable_options_stop_the_run_with_a_usage_error(
    pytester: pytest.Pytester, here: Recorded, args: list[str], message: str
) -> None:
    (pytester.path / "tests").mkdir()
    given = ["--agentsm-replay", str(here.db), *args]
    if "--agentsm-replay" in args:
        given = args
    result = pytester.runpytest(*given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_a_plain_run_imports_nothing_of_agentsm(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="""
        import sys

        def test_nothing_imported():
            assert "pytest_agentsm" in sys.modules  # the plugin is loaded ...
            loaded = {m.split(".")[0] for m in sys.modules}
            assert not loaded & {"agentsm", "replay", "eventstore"}  # ... and does nothing
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_log_by_url_on_each_backend(pytester: pytest.Pytester, db_url: str) -> None:
    store = open_store(db_url)
    try:
        ids = [_record(store, task) for task in ("Find a", "Find b")]
    finally:
        store.close()
    builder = ["--agentsm-builder", f"{AGENT}:reworded_for_b"]
    result = pytester.runpytest("--agentsm-replay", db_url, *builder, "-v", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"*::{ids[0]}[[]Find a[]] PASSED*", f"*{ids[1]}*FAILED*"])


def test_a_damaged_export_is_a_collection_error_naming_the_file(
    pytester: pytest.Pytester, here: Recorded
) -> None:
    whole = (pytester.path / "exports" / f"{here.ids['Find a']}.jsonl").read_text()
    (pytester.path / "exports" / "cut.jsonl").write_text(whole[:300])
    result = pytester.runpytest(
        "--agentsm-replay", "exports", "--agentsm-builder", f"{AGENT}:make_agent"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR collecting exports*", "exports/cut.jsonl: line 1: not JSON*"]
    )


def test_a_url_is_named_without_its_password() -> None:
    from pytest_agentsm.sources import RecordedSource

    assert (
        RecordedSource("postgresql://ann:s3cret@db:5432/runs").label
        == "postgresql://ann@db:5432/runs"
    )
    assert RecordedSource("postgresql://db/runs").label == "postgresql://db/runs"
