"""The notebooks run top to bottom on a fresh install, offline; their outputs are committed."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "providers"
NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


def _maker() -> object:
    spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOKS / "make_notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_notebooks"] = module
    spec.loader.exec_module(module)
    return module


def test_the_notebooks_are_there() -> None:
    assert NAMES == [
        "01_quickstart.ipynb",
        "02_record_and_replay.ipynb",
        "03_time_travel_and_branching.ipynb",
        "04_property_testing.ipynb",
        "05_human_in_the_loop.ipynb",
        "06_providers.ipynb",
        "07_extending_agents.ipynb",
        "08_reasoning_providers.ipynb",
        "09_conversations.ipynb",
        "10_coding_agent.ipynb",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_top_to_bottom(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert any(c.get("outputs") for c in code), "outputs are committed"
    maker = _maker()
    fresh = maker.build(name)  # type: ignore[attr-defined]
    assert [c.source for c in fresh.cells] == [c.source for c in committed.cells], (
        "the committed notebook is out of date: run python notebooks/make_notebooks.py"
    )
    started = time.perf_counter()
    executed = maker.execute(fresh, tmp_path)  # type: ignore[attr-defined]
    with capsys.disabled():  # the README promises a few seconds each: shown on every run
        print(f"\n{name} ran in {time.perf_counter() - started:.1f} s", end=" ")
    errors = [o for c in executed.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors


def test_the_property_testing_notebook_plants_its_bug_through_public_api() -> None:
    committed = nbformat.read(NOTEBOOKS / "04_property_testing.ipynb", as_version=4)
    source = "\n".join(c.source for c in committed.cells if c.cell_type == "code")
    assert "_reduce" not in source and "memory_module" not in source  # no private name patched
    assert "suppress_health_check" not in source  # hypothesis may say what it finds slow
    outputs = "\n".join(o.get("text", "") for c in committed.cells for o in c.get("outputs", []))
    reasons = ("'llm_error'", "'max_steps'", "'budget'")
    assert any(r in outputs for r in reasons)  # failed runs come with why they ended in Error
    assert "the handler of Verifying returned Recheck, but the table has no row" in outputs
    assert "builder=make_buggy_agent" in outputs


@pytest.mark.parametrize("when", ["committed", "run now"])
def test_the_extending_notebook_shows_each_capability_recorded_and_replayed(
    when: str, tmp_path: Path
) -> None:
    name = "07_extending_agents.ipynb"
    if when == "committed":
        notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    else:  # what a reader gets today, not only what was saved
        maker = _maker()
        notebook = maker.execute(maker.build(name), tmp_path)  # type: ignore[attr-defined]
    outputs = "\n".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
        for c in notebook.cells
        for o in c.get("outputs", [])
    )
    assert "('library_server', 'stdio', ('read_chapter',))" in outputs  # the MCP server's tools
    assert "step 8: fact_checker -> SUCCESS: Confirmed" in outputs  # the custom part of memory
    assert "ContextCompacted" in outputs and "cut to fit the context window" in outputs
    assert "Done after 9 steps" in outputs  # the run compacted and finished
    assert "↳ voyage-8-0" in outputs  # the sub-agent run under its parent
    assert "sub-agent run voyage-8-0: identical" in outputs  # replayed with the server gone
    assert "definition changed at seq 1" in outputs  # a changed server is a divergence


def test_the_branching_notebook_never_mixes_recorded_answers_with_new_results() -> None:
    committed = nbformat.read(NOTEBOOKS / "03_time_travel_and_branching.ipynb", as_version=4)
    outputs = "\n".join(
        str(o.get("text", "")) for c in committed.cells for o in c.get("outputs", [])
    )
    assert "stopped: needs a live LLM at seq 27 (its messages differ from the parent's)" in outputs
    assert "reused  seq 20  search(" in outputs  # the same call at the same place
    assert "B: About 11,000,000 people live on 105.4 km²: roughly 104,364 per km²." in outputs
    assert "(seq 26 asked for: a branch starts after a complete transition" in outputs


def test_the_reasoning_notebook_shows_each_provider_s_reasoning_sent_back_and_replayed() -> None:
    committed = nbformat.read(NOTEBOOKS / "08_reasoning_providers.ipynb", as_version=4)
    outputs = "\n".join(
        str(o.get("text", "")) for c in committed.cells for o in c.get("outputs", [])
    )
    assert "[thinking] The user wants me to:" in outputs  # streamed before the tool call
    assert "thinking (anthropic) 'The user wants me to:" in outputs
    assert "thinking block as recorded: True" in outputs  # Anthropic's second request
    assert "summary (openai-responses) '**Creating a structured poem**" in outputs
    assert "reasoning item as recorded: True" in outputs  # encrypted, sent back in place
    assert "signature as recorded: True" in outputs  # Gemini's on its function call
    assert "thinking (gemini) '**A Safe Street-Crossing Guide" in outputs  # a thought part
    assert "thinking (bedrock) 'This is a straightforward question" in outputs
    assert (
        "redacted (openai-responses) ''" in outputs and "Paris from /openai/v1/responses" in outputs
    )
    assert "YES [('lookup_population', 'SUCCESS: 123124'), ('can_have_dragons'" in outputs
    assert "(thinking, anthropic) The user wants me to:" in outputs  # memory --messages
    assert outputs.count(": identical (") == 8  # seven runs replayed offline, and the branch
    assert "live    seq 15  LLM call (plan)" in outputs
    assert "the parent's thinking sent back: True" in outputs


def test_the_recordings_the_notebook_plays_are_the_tests_and_name_origin_and_license() -> None:
    folder = NOTEBOOKS / "recorded"
    readme = (folder / "README.md").read_text()
    recordings = sorted(folder.rglob("*.json"))
    assert len(recordings) == 12
    for path in recordings:
        name = path.relative_to(folder).as_posix()
        assert path.read_bytes() == (FIXTURES / name).read_bytes(), name
        source = json.loads(path.read_text())["source"]
        (row,) = [line for line in readme.splitlines() if f"`{name}`" in line]
        assert f"{source['repository']} `{source['path']}`" in row and source["license"] in row


def test_the_conversations_notebook_steers_asks_stops_replays_and_branches() -> None:
    committed = nbformat.read(NOTEBOOKS / "09_conversations.ipynb", as_version=4)
    outputs = "\n".join(
        str(o.get("text", "")) for c in committed.cells for o in c.get("outputs", [])
    )
    assert "Thread('weekend', turns=10, last='weekend-10')" in outputs
    assert "Casa Alfama, 120 € a night (under 150 €, as you asked)." in outputs  # steered
    assert "weekend-5 11 Observing Steered message 'Under 150 € a night, please.'" in outputs
    assert "weekend-6 [('question', 'For which nights?')]" in outputs  # asked a person
    assert "Casa Alfama booked, Friday to Sunday: confirmation LX-2041." in outputs
    assert "requested\nRun weekend-7 stopped where it was asked to" in outputs  # from outside
    assert "day 3: Sintra." in outputs  # resumed to its answer
    assert outputs.count(": identical (") == 13  # ten turns, then the branch's three
    assert "identical: True" in outputs
    assert "ThreadBranched('madrid' from 'weekend' at turn 3, done" in outputs
    assert "('weekend-1', 'weekend-2', 'madrid-3')" in outputs  # shares turns 1 and 2
    assert "weekend@3" in outputs  # agentsm threads: where the branch came from


def test_the_coding_agent_notebook_reads_asks_is_refused_waits_edits_replays_and_branches() -> None:
    committed = nbformat.read(NOTEBOOKS / "10_coding_agent.ipynb", as_version=4)
    outputs = "\n".join(
        str(o.get("text", "")) for c in committed.cells for o in c.get("outputs", [])
    )
    assert "'write_file', 'edit_file', 'getPackage']" in outputs  # workspace and API tools
    assert "waiting for a person: edit_file" in outputs  # nothing written before approval
    assert '-> SUCCESS: HTTP 200 OK\n{"name": "httpx", "latest": "0.28.1"}' in outputs
    assert "-> ERROR: OutsideWorkspace: '../deploy.env' leads out of the workspace" in outputs
    assert "httpx==0.28.1\npydantic==2.9.2" in outputs  # edited once approved
    assert "run bump-httpx: identical (" in outputs  # workspace deleted, service stopped
    assert "given   seq 35  LLM call (plan): the answer given" in outputs  # the branch
    assert "requirements.txt is unchanged, for you to review." in outputs
