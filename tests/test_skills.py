"""Skills: SKILL.md directories offered as an index in the system prompt and read on demand
through the recorded `read_skill` tool; the run's definition records them, so a replay needs no
skill files and a changed skill diverges at the first fact."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentsm import (
    AgentBuilder,
    AgentMemory,
    BuildError,
    LlmResponse,
    MockLlmCaller,
    SkillSet,
    ToolRegistry,
)
from agentsm import facts as f
from agentsm.skills import parse_front_matter, skill_index
from agentsm.trace import Trace
from eventstore import SQLiteEventStore
from replay import branch_run, replay_run

ROOT = Path(__file__).resolve().parent.parent

PDF = """---
name: pdf
description: >
  Fill PDF forms and
  extract their text.
license: Apache-2.0
metadata:
  author: example
  version: "1.0"
---
# Working with PDFs

Run `pdftotext file.pdf -` and read the output.
"""

CSV = """---
name: csv
description: "Clean CSV files: quoting, encodings, headers"
---
Open the file with the csv module, never with split(',').
"""


def write_skill(root: Path, folder: str, text: str) -> Path:
    (root / folder).mkdir(parents=True, exist_ok=True)
    path = root / folder / "SKILL.md"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "pdf", PDF)
    write_skill(root, "csv", CSV)
    (root / "not-a-skill").mkdir()  # a folder without SKILL.md is no skill
    return root


class Seeing:
    """A scripted LLM that keeps the messages of every request it got."""

    def __init__(self, script: list[LlmResponse]) -> None:
        self.mock = MockLlmCaller(script)
        self.requests: list[list[dict[str, Any]]] = []

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        self.requests.append(memory.build_messages())
        return await self.mock.call(memory, tools, model)


def script() -> list[LlmResponse]:
    return [
        LlmResponse.tool_call("read_skill", {"name": "pdf"}, id="c1"),
        LlmResponse.final_answer("Converted the PDF with pdftotext and read it."),
    ]


def agent(task: str, *dirs: Path, db: Path | None = None) -> AgentBuilder:
    builder = AgentBuilder(task).system_prompt("You are careful.").skills(*dirs)
    return builder.store(db) if db is not None else builder


def test_skills_are_indexed_in_the_prompt_and_read_through_a_recorded_tool(
    skills_dir: Path, tmp_path: Path
) -> None:
    llm = Seeing(script())
    engine = agent("Read report.pdf", skills_dir, db=tmp_path / "runs.db").llm(llm).build()
    assert engine.run() == "Converted the PDF with pdftotext and read it."

    system = llm.requests[0][0]
    assert system["role"] == "system" and system["content"].startswith("You are careful.\n\n")
    assert "<available_skills>" in system["content"]
    assert "<name>pdf</name>" in system["content"] and "<name>csv</name>" in system["content"]
    assert "<description>Fill PDF forms and extract their text.</description>" in system["content"]
    assert "Run `pdftotext" not in system["content"]  # bodies only on demand

    facts = Trace.load(engine.store, engine.run_id).facts()
    started = facts[0]
    assert isinstance(started, f.RunStarted)
    assert started.system_prompt == "You are careful."  # the user's own prompt
    assert [(s.name, s.source) for s in started.skills] == [("csv", "dir:0"), ("pdf", "dir:0")]
    assert "read_skill" in [t.name for t in started.tools]
    executed = [x for x in facts if isinstance(x, f.ToolExecuted)]
    assert executed[0].call.name == "read_skill" and executed[0].success
    assert "pdftotext file.pdf" in executed[0].observation
    assert "pdftotext file.pdf" in llm.requests[1][-1]["content"]  # the LLM saw the body


def test_a_later_directory_overrides_a_skill_of_the_same_name(
    skills_dir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "team-skills"
    write_skill(other, "pdf-v2", PDF.replace("Fill PDF forms", "Our own PDF rules"))
    skills = SkillSet.load(skills_dir, other)
    assert [s.name for s in skills] == ["csv", "pdf"]
    pdf = next(s for s in skills if s.name == "pdf")
    assert pdf.source == "dir:1" and pdf.description.startswith("Our own PDF rules")
    assert skills.path("pdf") == other / "pdf-v2" / "SKILL.md"
    builder = AgentBuilder("t").skills(skills_dir).skills(other)
    assert [s.source for s in builder.skill_set.skills] == ["dir:0", "dir:1"]


def test_unknown_skill_is_a_failed_call_the_llm_can_read(skills_dir: Path) -> None:
    responses = [
        LlmResponse.tool_call("read_skill", {"name": "excel"}),
        LlmResponse.final_answer("No excel skill; answered without it."),
    ]
    engine = agent("t", skills_dir).llm(MockLlmCaller(responses)).build()
    engine.run()
    executed = [x for x in engine.trace().facts() if isinstance(x, f.ToolExecuted)]
    assert not executed[0].success
    assert "no skill named 'excel'" in executed[0].observation
    assert "csv, pdf" in executed[0].observation


def test_replay_needs_no_skill_files(skills_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = agent("Read report.pdf", skills_dir, db=db).llm(MockLlmCaller(script())).build()
    engine.run()
    shutil.rmtree(skills_dir)  # the files are gone: the log holds what the run needs

    report = replay_run(db, engine.run_id)
    assert report.identical, str(report)
    branch = branch_run(db, engine.run_id, at=3, llm_response=script()[0]).run_id
    store = SQLiteEventStore(db)
    last = Trace.load(store, branch).facts()[-1]
    assert isinstance(last, f.RunFinished) and last.status == "done", last
    store.close()

    cli = subprocess.run(
        [sys.executable, "-m", "replay", "replay", engine.run_id, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ},
        timeout=120,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "identical" in cli.stdout


def test_a_changed_skill_diverges_at_the_first_fact(skills_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = agent("Read report.pdf", skills_dir, db=db).llm(MockLlmCaller(script())).build()
    engine.run()

    assert replay_run(db, engine.run_id, lambda task: agent(task, skills_dir)).identical
    write_skill(skills_dir, "pdf", PDF.replace("pdftotext", "qpdf"))
    report = replay_run(db, engine.run_id, lambda task: agent(task, skills_dir))
    assert not report.identical
    change = report.definition_change
    assert change is not None and change.seq == 1
    assert change.fields == ["skills"] and "digest" in change.diff


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("# PDF\n\nno front matter here\n", "has no front matter"),
        ("---\ndescription: d\n---\nbody\n", "has no name"),
        ("---\nname: pdf\n---\nbody\n", "has no description"),
        ("---\nname: pdf\ndescription: d\n", "is never closed"),
        ("---\nname: pdf\nthis line is not yaml\n---\n", "is not a 'key: value' line"),
        ("---\nname: my pdf\ndescription: d\n---\n", "spaces or markup"),
        ("---\nname: pdf\nname: pdf2\ndescription: d\n---\n", "is given twice"),
        ('---\nname: "pdf\ndescription: d\n---\n', "opens a quote"),
    ],
)
def test_bad_skill_files_are_build_errors_naming_the_file(
    tmp_path: Path, text: str, says: str
) -> None:
    path = write_skill(tmp_path, "broken", text)
    with pytest.raises(BuildError, match=says) as caught:
        AgentBuilder("t").skills(tmp_path)
    assert str(path) in str(caught.value)


def test_a_missing_directory_and_two_skills_of_one_name_are_build_errors(
    tmp_path: Path,
) -> None:
    with pytest.raises(BuildError, match="does not exist"):
        AgentBuilder("t").skills(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    write_skill(tmp_path / "lower", "pdf", PDF).rename(tmp_path / "lower" / "pdf" / "skill.md")
    for nothing in ("empty", "lower"):  # no SKILL.md anywhere: an error, not no skills
        with pytest.raises(BuildError, match="holds no skill.*named exactly SKILL.md"):
            AgentBuilder("t").skills(tmp_path / nothing)
    write_skill(tmp_path, "a", CSV)
    write_skill(tmp_path, "b", CSV)
    with pytest.raises(BuildError, match="Two skills .* are named 'csv'"):
        SkillSet.load(tmp_path)


def test_front_matter_forms() -> None:
    values, body = parse_front_matter(
        "---\n"
        "name: 'it''s'\n"
        'description: "a \\"quoted\\" value"  \n'
        "plain: a value # a comment\n"
        "folded: first\n"
        "  second\n"
        "literal: |\n"
        "  line one\n"
        "  line two\n"
        "nested:\n"
        "  - item\n"
        "---\n"
        "\n"
        "The body.\n"
    )
    assert values == {
        "name": "it's",
        "description": 'a "quoted" value',
        "plain": "a value",
        "folded": "first second",
        "literal": "line one\nline two",
        "nested": "",
    }
    assert body == "The body."


def test_a_skill_directory_by_itself_and_the_index_escapes_markup(tmp_path: Path) -> None:
    write_skill(tmp_path, "amp", "---\nname: amp\ndescription: Tom & Jerry <cartoons>\n---\nx\n")
    skills = SkillSet.load(tmp_path / "amp")
    assert [s.name for s in skills] == ["amp"]
    assert "Tom &amp; Jerry &lt;cartoons&gt;" in skill_index(skills)
    assert skill_index(()) == ""
    assert repr(skills) == "SkillSet(amp)" and "Skill('amp'" in repr(skills.skills[0])
