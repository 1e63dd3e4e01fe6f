"""Comparing two runs fact by fact: the first divergence and a readable report of it.

A changed definition (`RunStarted`: prompt, config, tools, model) is reported on its own, at
seq 1, and the comparison goes on: behaviour is every later fact and every LLM request as it
was sent (model, request settings, tools with their schemas, messages), so the first fact the
new definition changes is the divergence (a reworded prompt at its first request), and a change
that reaches none of them (a limit never reached, a timeout, a flag of a tool that never
crashed) leaves the behaviour identical. Values are compared as JSON holds them: 1, 1.0 and
true differ. Error texts (a run's abort, failure or error message) are compared without what
differs between two processes (object addresses, asyncio task numbers); an observation is
compared as it is, since the LLM reads it."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agentsm.frozen import same_json
from agentsm.text import plural
from agentsm.trace import TraceEntry

from .requests import Views, request_diff

__all__ = ["Divergence", "ReplayReport", "compare_runs", "first_divergence"]

_VOLATILE = re.compile(r"\b0x[0-9a-fA-F]{4,}\b|\bTask-\d+\b")
_ERROR_TEXT = frozenset({"message", "error", "reason"})
_REQUEST_PARTS = {"messages_digest": "messages", "tools_digest": "tool schemas"}


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


def comparable(entry: TraceEntry) -> dict[str, Any]:
    """What two runs must share for a fact to count as the same: the state that recorded it
    and the fact itself. Envelope timestamps and measurements are left out."""
    return {"state": entry.state, "fact": _stable(entry.fact.model_dump(mode="json"))}


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
            if key not in a or key not in b or not same_json(a[key], b[key])
            for name in _changed_fields(a.get(key), b.get(key), f"{prefix}{key}.")
        ]
    return [prefix.rstrip(".")]


@dataclass(frozen=True)
class Divergence:
    """Where two runs part: the seq, the fact expected (recorded) and the one produced; at an
    LLM request, `request` is what the two requests sent, as a diff (the fact holds digests)."""

    seq: int
    expected: TraceEntry | None
    actual: TraceEntry | None
    request: str = ""

    @property
    def diff(self) -> str:
        """A unified diff of the two facts (non-ASCII text shown as text), then, at an LLM
        request, of what the two requests sent."""
        facts = "\n".join(
            difflib.unified_diff(
                _pretty(self.expected), _pretty(self.actual), "recorded", "replayed", lineterm=""
            )
        )
        return "\n".join(part for part in (facts, self.request) if part)

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
        if exp == act == "LlmRequested":
            what = ", ".join(_REQUEST_PARTS.get(name, name) for name in self.fields) or "settings"
            return f"seq {self.seq} ({state}): the LLM request changed: {what}"
        return f"seq {self.seq} ({state}): recorded {exp}, replay produced {act}"

    def __str__(self) -> str:
        return f"first divergence at {self.headline()}\n{self.diff}"


def _same(a: TraceEntry, b: TraceEntry) -> bool:
    """Whether two entries hold the same fact, as JSON holds it, in the same state."""
    x, y = a.fact, b.fact
    return a.state == b.state and type(x) is type(y) and same_json(x.__dict__, y.__dict__)


def _first(
    expected: Sequence[TraceEntry], actual: Sequence[TraceEntry], *, settings_changed: bool
) -> int | None:
    """The position of the first pair of entries that differ (or where one sequence ends)."""
    for at, (exp, act) in enumerate(zip(expected, actual, strict=False)):  # the longer: below
        if _same(exp, act) or same_json(comparable(exp), comparable(act)):
            if settings_changed and exp.event == "LlmRequested":
                return at  # the same fact, but the request was sent with other settings
            continue
        return at
    return None if len(expected) == len(actual) else min(len(expected), len(actual))


def first_divergence(
    expected: Sequence[TraceEntry],
    actual: Sequence[TraceEntry],
    *,
    settings_changed: bool = False,
) -> Divergence | None:
    """The first seq at which the two sequences of facts differ, or None if they are equal.
    `settings_changed`: the LLM's request settings differ, so the first LLM request does."""
    at = _first(expected, actual, settings_changed=settings_changed)
    return None if at is None else _parting(expected, actual, at)


def _parting(expected: Sequence[TraceEntry], actual: Sequence[TraceEntry], at: int) -> Divergence:
    """The divergence at position `at` (where the two differ, or one of them ends)."""
    exp = expected[at] if at < len(expected) else None
    act = actual[at] if at < len(actual) else None
    seq = exp.seq if exp is not None else act.seq if act is not None else 0
    return Divergence(seq, exp, act)


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
        """True when, the definition aside, every fact and every LLM request was the same
        (children too)."""
        return self.divergence is None and all(c.same_behaviour for c in self.children)

    def __bool__(self) -> bool:
        return self.identical

    def __str__(self) -> str:
        text = self._own()
        for child in self.children:
            text += "\n" + "\n".join("  " + line for line in f"sub-agent {child}".splitlines())
        return text

    def _own(self) -> str:
        change, divergence = self.definition_change, self.divergence
        if divergence is None and change is None:
            return f"run {self.run_id}: identical ({plural(self.compared, 'fact')} compared)"
        behaviour = (
            f"behaviour diverged at seq {divergence.seq}"
            if divergence is not None
            else f"behaviour identical ({plural(self.compared, 'fact')} compared)"
        )
        lines = [f"run {self.run_id}: " + ("definition changed; " if change else "") + behaviour]
        if change is not None:
            lines.append(f"definition changed at {change.headline()}\n{change.diff}")
        if divergence is not None:
            lines.append(str(divergence))
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
    run_id: str,
    expected: Sequence[TraceEntry],
    actual: Sequence[TraceEntry],
    *,
    views: Views | None = None,
) -> ReplayReport:
    """Compare a recording with its replay: the definitions (seq 1) on their own, then every
    later fact and LLM request, so that a changed definition hides nothing it changed. `views`:
    the messages of requests the replay's handlers made, by digest (for a readable diff)."""
    change = None
    first = 0
    settings_changed = False
    if (
        expected
        and actual
        and expected[0].event == actual[0].event == "RunStarted"
        and not same_json(comparable(expected[0]), comparable(actual[0]))
    ):
        change = Divergence(expected[0].seq, expected[0], actual[0])
        first = 1
        settings = [getattr(e.fact, "llm", None) for e in (expected[0], actual[0])]
        settings_changed = not same_json(*settings)
    at = _first(expected[first:], actual[first:], settings_changed=settings_changed)
    divergence = None
    if at is not None:
        divergence = _parting(expected, actual, at + first)
        exp, act = divergence.expected, divergence.actual
        if exp is not None and act is not None and exp.event == act.event == "LlmRequested":
            request = request_diff(expected, actual, at + first, views)
            divergence = replace(divergence, request=request)
    return ReplayReport(run_id, len(expected), divergence, change)
