"""Comparing two runs fact by fact: the first divergence and a readable report of it."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentsm.trace import TraceEntry

__all__ = ["Divergence", "ReplayReport", "first_divergence"]


def comparable(entry: TraceEntry) -> dict[str, Any]:
    """What two runs must share for a fact to count as the same: the state that recorded it
    and the fact itself. Envelope timestamps and measurements are left out."""
    return {"state": entry.state, "fact": entry.fact.model_dump(mode="json")}


def _pretty(entry: TraceEntry | None) -> list[str]:
    if entry is None:
        return ["(no fact: the run ends here)"]
    return json.dumps(comparable(entry), indent=2, sort_keys=True, ensure_ascii=False).splitlines()


@dataclass(frozen=True)
class Divergence:
    """Where two runs part: the seq, the fact expected (recorded) and the one produced."""

    seq: int
    expected: TraceEntry | None
    actual: TraceEntry | None

    @property
    def diff(self) -> str:
        """A unified diff of the two facts."""
        return "\n".join(
            difflib.unified_diff(
                _pretty(self.expected), _pretty(self.actual), "recorded", "replayed", lineterm=""
            )
        )

    def headline(self) -> str:
        """One line: where, and which kinds of fact."""
        exp = self.expected.event if self.expected else "nothing"
        act = self.actual.event if self.actual else "nothing"
        either = self.expected or self.actual
        state = either.state if either is not None else ""
        return f"seq {self.seq} ({state}): recorded {exp}, replay produced {act}"

    def __str__(self) -> str:
        return f"first divergence at {self.headline()}\n{self.diff}"


def first_divergence(
    expected: Sequence[TraceEntry], actual: Sequence[TraceEntry]
) -> Divergence | None:
    """The first seq at which the two sequences of facts differ, or None if they are equal."""
    for i in range(max(len(expected), len(actual))):
        exp = expected[i] if i < len(expected) else None
        act = actual[i] if i < len(actual) else None
        if exp is None or act is None or comparable(exp) != comparable(act):
            seq = (exp or act).seq if (exp or act) else i + 1  # type: ignore[union-attr]
            return Divergence(seq, exp, act)
    return None


@dataclass(frozen=True)
class ReplayReport:
    """The outcome of replaying a run: identical, or the first divergence."""

    run_id: str
    compared: int
    divergence: Divergence | None

    @property
    def identical(self) -> bool:
        """True when every recorded fact was produced again, in order, and nothing more."""
        return self.divergence is None

    def __bool__(self) -> bool:
        return self.identical

    def __str__(self) -> str:
        if self.divergence is None:
            return f"run {self.run_id}: identical ({self.compared} facts compared)"
        return f"run {self.run_id}: diverged\n{self.divergence}"

    def __repr__(self) -> str:
        where = "identical" if self.divergence is None else f"diverged at seq {self.divergence.seq}"
        return f"ReplayReport(run_id={self.run_id!r}, {where}, compared={self.compared})"
