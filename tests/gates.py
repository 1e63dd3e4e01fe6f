"""Helpers of the tests that act on a run while it goes on (steering, questions, stopping): a
gate the agent's slow tool waits at (`tests/outside_agent.py`), an engine running in a thread,
and the `agentsm` command in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentsm import AgentEngine

ROOT = Path(__file__).resolve().parent.parent


class Gate:
    """The folder the agent's `slow(n)` waits in: `started(n)` waits for the call to begin,
    `go(n)` lets it end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(exist_ok=True)

    def started(self, n: int, timeout: float = 30.0) -> None:
        pause = threading.Event()
        for _ in range(int(timeout / 0.01)):
            if (self.folder / f"started-{n}").exists():
                return
            pause.wait(0.01)
        raise AssertionError(f"slow({n}) never started")

    def go(self, n: int) -> None:
        (self.folder / f"go-{n}").write_text("")


def open_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gate:
    """A gate for this test's runs (processes started by `agentsm` below get it too)."""
    monkeypatch.setenv("AGENTSM_TEST_GATE", str(tmp_path / "gate"))
    return Gate(tmp_path / "gate")


def agentsm(*args: str) -> subprocess.CompletedProcess[str]:
    """The `agentsm` command in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "replay", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=120,
    )


class Running:
    """An engine running in a thread of its own (as another part of a program would)."""

    def __init__(self, engine: AgentEngine) -> None:
        self.engine = engine
        self.answer: str | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.answer = self.engine.run()
        except BaseException as e:
            self.error = e

    def join(self) -> str:
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the run never ended"
        if self.error is not None:
            raise self.error
        assert self.answer is not None
        return self.answer
