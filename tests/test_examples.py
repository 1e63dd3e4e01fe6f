"""The examples run offline with --mock, as the README tells users to run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentsm import AgentMemory, State
from eventstore import SQLiteEventStore

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("basic_agent.py", "Paris is the capital of France"),
        ("multi_tool_agent.py", "Planning --ToolBlacklisted--> Planning"),
        ("anthropic_agent.py", "[tool] get_weather -> SUCCESS: San Francisco, CA"),
    ],
)
def test_example_runs_offline(script: str, expected: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--mock", "--db", str(tmp_path / "ex.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout
    store = SQLiteEventStore(tmp_path / "ex.db", create=False)
    (run,) = store.runs()
    assert AgentMemory.rebuild(store, run.run_id)[1] == State.Done
