"""Counts and cut texts as the reader sees them: `1 entry`, never `1 entries`; a long text cut
after a whole word, with an ellipsis."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentsm import AgentBuilder, LlmResponse, MockLlmCaller
from agentsm.facts import ObservationCommitted
from agentsm.history import History
from agentsm.text import plural, shortened
from agentsm.trace import summarize
from agentsm.types import HistoryEntry, ToolCall
from replay.cli import main
from replay.copying import CopyReport


def test_counts_are_said_in_the_singular_for_one() -> None:
    assert [plural(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]
    assert (
        plural(1, "entry", "entries") == "1 entry" and plural(3, "entry", "entries") == "3 entries"
    )
    one = HistoryEntry(step=1, tool=ToolCall(name="search"), observation="found", success=True)
    assert repr(History([one])) == "History(1 entry)" and repr(History([])) == "History(0 entries)"
    assert summarize(ObservationCommitted(entries=(one,))) == "1 entry"
    assert str(CopyReport(copied=("r1",), present=())) == "1 run copied"
    with pytest.raises(IndexError, match=r"it has 1 entry\)"):
        History([one])[1]


def test_long_texts_are_cut_after_a_whole_word_with_an_ellipsis() -> None:
    assert shortened("hello world", 11) == "hello world"
    assert shortened("hello worldwide", 12) == "hello…"  # never "hello world…"
    assert shortened("hello world foo", 12) == "hello world…"
    assert shortened("see https://example.com/a/very/long/address", 20) == "see https://example…"
    assert all(len(shortened("a few words " * 20, n)) <= n for n in range(1, 60))


def test_memory_cuts_a_long_observation_after_a_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return "Paris is the capital and most populous city of France, " * 4

    llm = MockLlmCaller(
        [
            LlmResponse.tool_call("lookup", {"topic": "Paris"}),
            LlmResponse.final_answer("Paris is the capital of France, by far its largest city."),
        ]
    )
    engine = AgentBuilder("About Paris").tool(lookup).llm(llm).store(tmp_path / "r.db").build()
    engine.run()
    engine.store.close()
    assert main(["--db", str(tmp_path / "r.db"), "memory", engine.run_id]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "lookup(" in x)
    said, whole = line.split(" -> ")[1], "SUCCESS: " + lookup("Paris")
    assert said.endswith("…") and len(said) <= 80 and whole.startswith(said[:-1])
    assert whole[len(said) - 1] == " " and said[-2].isalpha()  # the cut falls between words
