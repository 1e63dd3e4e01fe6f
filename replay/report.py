"""Comparing two runs fact by fact: the first divergence and a readable report of it.

A changed definition (`RunStarted`: prompt, config, tools, model) is reported on its own, at
seq 1, and the comparison goes on, so that the first change in behaviour after it is found too.
Once the definition changed, an LLM request is compared by purpose only: its model, tool set and
message digest follow from the definition, which changed on purpose. Error texts (a run's abort,
failure or error message) are compared without what differs between two processes (object
addresses, asyncio task numbers); an observation is compared as it is, since the LLM reads it."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentsm.trace import TraceEntry

__all__ = ["Divergence", "ReplayReport", "compare_runs", "first_divergence"]

_VOLATILE = re.compile(r"\b0x[0-9a-fA-F]{4,}\b|\bTask-\d+\b")
_ERROR_TEXT = frozenset({"message", "error", "reason"})
_DERIVED = ("model", "messages_digest", "tools", "tools_digest")  # of LlmRequested


def _stable(data: Any) -> Any:
    """Error messages with object addresses and task numbers masked; the rest as it is."""
    if isinstance(data, list):
        return [_stable(item) for item in data]
    if not isinstance(data, dict):
        return data
    return {
        key: _VOLATILE.sub("…", value)
        if isinstance(value, str) and key in _ERROR_TEXT
        else _stable(value)
        for key, value in data.items()
    }


def comparable(entry: TraceEntry, *, definition_changed: bool = False) -> dict[str, Any]:
    """What two runs must share for a fact to count as the same: the state that recorded it
    and the fact itself. Envelope timestamps and measurements are left out."""
    fact = _stable(entry.fact.model_dump(mode="json"))
    if definition_changed and fact.get("kind") == "LlmRequested":
        fact = {k: v for k, v in fact.items() if k not in _DERIVED}
    return {"state": entry.state, "fact": fact}


def _pretty(entry: TraceEntry | None) -> list[str]:
    if entry is None:
        return ["(no fact: the run ends here)"]
    text = json.dumps(
        {"state": entry.state, "fact": entry.fact.model_dump(mode="json")},
        indent=2,
        sort_keys=True,
        ensure_ascii=False,
    )
    return text.splitlines()


def _changed_fields(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict) and prefix.count(".") < 2:
        return [
            name
            for key in sorted(set(a) | set(b))
            if a.get(key) != b.get(key)
            for name in _changed_fields(a.get(key), b.get(key), f"{prefix}{key}.")
        ]
    return [prefix.rstrip(".")]


@dataclass(frozen=True)
class Divergence:
    """Where two runs part: the seq, the fact expected (recorded) and the one produced."""

    seq: int
    expected: TraceEntry | None
    actual: TraceEntry | None

    @property
    def diff(self) -> str:
        """A unified diff of the two facts (non-ASCII text shown as text)."""
        return "\n".join(
            difflib.unified_diff(
                _pretty(self.expected), _pretty(self.actual), "recorded", "replayed", lineterm=""
            )
        )

    @property
    def fields(self) -> list[str]:
        """The fields of the fact that differ (`config.max_steps`, `system_prompt`, ...)."""
        if self.expected is None or self.actual is None:
            return []
        return _changed_fields(
            self.expected.fact.model_dump(mode="json"), self.actual.fact.model_dump(mode="json")
        )

    def headline(self) -> str:
        """One line: where, and which kinds of fact."""
        exp = self.expected.event if self.expected else "nothing"
        act = self.actual.event if self.actual else "nothing"
        either = self.expected or self.actual
        state = either.state if either is not None else ""
        if exp == act == "RunStarted":
            return f"seq {self.seq} ({state}): the definition changed: {', '.join(self.fields)}"
        return f"seq {self.seq} ({state}): recorded {exp}, replay produced {act}"

    def __str__(self) -> str:
        return f"first divergence at {self.headline()}\n{self.diff}"


def _same(a: TraceEntry, b: TraceEntry) -> bool:
    """Whether two entries hold equal facts in the same state: facts of one type with equal
    fields (one comparison of their fields, nested facts compared as pydantic compares them),
    else as pydantic compares them."""
    x, y = a.fact, b.fact
    return a.state == b.state and ((type(x) is type(y) and x.__dict__ == y.__dict__) or x == y)


def first_divergence(
    expected: Sequence[TraceEntry],
    actual: Sequence[TraceEntry],
    *,
    definition_changed: bool = False,
) -> Divergence | None:
    """The first seq at which the two sequences of facts differ, or None if they are equal."""
    for exp, act in zip(expected, actual, strict=False):  # the longer one: below
        if _same(exp, act):
            continue  # equal facts compare equal (the usual case, and a cheap one)
        if comparable(exp, definition_changed=definition_changed) != comparable(
            act, definition_changed=definition_changed
        ):
            return Divergence(exp.seq, exp, act)
    if len(expected) == len(actual):
        return None
    shared = min(len(expected), len(actual))  # one ends there: the other's next fact differs
    if shared < len(expected):
        return Divergence(expected[shared].seq, expected[shared], None)
    return Divergence(actual[shared].seq, None, actual[shared])


@dataclass(frozen=True)
class ReplayReport:
    """The outcome of replaying a run: identical, or a changed definition (seq 1) and the
    first divergence in behaviour after it, each reported on its own."""

    run_id: str
    compared: int
    divergence: Divergence | None
    definition_change: Divergence | None = None
    children: tuple[ReplayReport, ...] = ()
    """The replays of the run's sub-agent runs, when they were asked for (`children=True`)."""

    @property
    def identical(self) -> bool:
        """True when every recorded fact was produced again, in order, and nothing more (in
        the sub-agent runs replayed with it too)."""
        return (
            self.divergence is None
            and self.definition_change is None
            and all(c.identical for c in self.children)
        )

    @property
    def same_behaviour(self) -> bool:
        """True when, the definition aside, every fact was produced again (children too)."""
        return self.divergence is None and all(c.same_behaviour for c in self.children)

    def __bool__(self) -> bool:
        return self.identical

    def __str__(self) -> str:
        text = self._own()
        for child in self.children:
            text += "\n" + "\n".join("  " + line for line in f"sub-agent {child}".splitlines())
        return text

    def _own(self) -> str:
        if self.divergence is None and self.definition_change is None:
            return f"run {self.run_id}: identical ({self.compared} facts compared)"
        lines = [f"run {self.run_id}: " + ("diverged" if self.divergence else "same behaviour")]
        if self.definition_change is not None:
            change = self.definition_change
            lines.append(f"definition changed at {change.headline()}\n{change.diff}")
            if self.divergence is None:
                lines.append(f"then identical ({self.compared} facts compared)")
        if self.divergence is not None:
            lines.append(str(self.divergence))
        return "\n".join(lines)

    def __repr__(self) -> str:
        parts = []
        if self.definition_change is not None:
            parts.append("definition changed")
        if self.divergence is not None:
            parts.append(f"diverged at seq {self.divergence.seq}")
        where = ", ".join(parts) or "identical"
        family = f", children={len(self.children)}" if self.children else ""
        return f"ReplayReport(run_id={self.run_id!r}, {where}, compared={self.compared}{family})"


def compare_runs(
    run_id: str, expected: Sequence[TraceEntry], actual: Sequence[TraceEntry]
) -> ReplayReport:
    """Compare a recording with its replay: the definitions (seq 1) on their own, then every
    later fact, so that a changed definition does not hide what it changed (or did not)."""
    change = None
    if (
        expected
        and actual
        and expected[0].event == actual[0].event == "RunStarted"
        and comparable(expected[0]) != comparable(actual[0])
    ):
        change = Divergence(expected[0].seq, expected[0], actual[0])
        expected, actual = expected[1:], actual[1:]
    divergence = first_divergence(expected, actual, definition_changed=change is not None)
    return ReplayReport(run_id, len(expected) + (change is not None), divergence, change)
