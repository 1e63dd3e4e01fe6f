"""What a running tool reports (`ToolContext.progress`, `.partial`): sent to the run's listeners
as outputs as it comes, from any thread, and counted for the call's measurements. Nothing of
it is a fact: a replay serves the recorded result without running the tool, and its facts are
the same whether the tool reported or not."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Literal

from .outputs import AgentOutput, ToolPartial, ToolProgress
from .types import ToolCall

__all__ = ["CallReports"]


class CallReports:
    """The reports of one call: each becomes a `ToolProgress` or `ToolPartial` output on the
    event loop's thread (reports from a sync tool's thread are handed over to the loop, where
    they come before the call's result); once the call has settled, later reports (from a
    call abandoned at its timeout) are dropped."""

    def __init__(self, call: ToolCall, emit: Callable[[AgentOutput], None]) -> None:
        self.call = call
        self._emit = emit
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._lock = threading.Lock()
        self.progress = 0
        self.partials = 0
        self._open = True

    def __call__(self, kind: Literal["progress", "partial"], value: Any) -> None:
        with self._lock:
            if not self._open:
                return
            if kind == "progress":
                self.progress += 1
                output: AgentOutput = ToolProgress(self.call, value)
            else:
                self.partials += 1
                output = ToolPartial(self.call, value)
        if threading.get_ident() == self._thread:
            self._emit(output)
            return
        try:
            self._loop.call_soon_threadsafe(self._emit, output)
        except RuntimeError:  # the loop is closed: nobody listens any more
            pass

    def settled(self) -> dict[str, int]:
        """Close the reports; the counts for the call's measurements (none when none)."""
        with self._lock:
            self._open = False
        counts = {"progress": self.progress, "partials": self.partials}
        return {k: v for k, v in counts.items() if v}

    def __repr__(self) -> str:
        return (
            f"CallReports({self.call.name!r}, progress={self.progress}, partials={self.partials})"
        )
