"""A run's timeline: the state at every fact, tool calls, tokens per LLM call, durations."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from .. import facts as f
from ..trace import TraceEntry
from ..types import State
from ._mpl import figure

__all__ = ["Stretch", "stretches", "timeline"]

_ORDER = [
    State.Idle,
    State.Planning,
    State.WaitingForHuman,
    State.Acting,
    State.ParallelActing,
    State.Observing,
    State.Reflecting,
    State.Done,
    State.Error,
]


def timeline(entries: list[TraceEntry], title: str = "") -> Any:
    """A matplotlib Figure with three rows sharing the fact sequence as x axis: the state the
    engine was in (tool calls marked green or red), tokens per LLM call, and how long each
    LLM call and tool took."""
    states = [e.state for e in entries]
    names = [s for s in _ORDER if s in states] + sorted({s for s in states} - set(_ORDER))
    rank = {name: i for i, name in enumerate(names)}
    seqs = [e.seq for e in entries]
    fig = figure(11, 7.5)
    top, middle, bottom = fig.subplots(
        3, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1.4, 1.4]}
    )
    top.step(seqs, [rank[s] for s in states], where="post", color="#2b2d42", lw=1.4)
    top.set_yticks(range(len(names)), names, fontsize=8)
    top.invert_yaxis()
    tools = [(e.seq, rank[e.state], e.fact) for e in entries if isinstance(e.fact, f.ToolExecuted)]
    labels = [
        (seq, row, fact.call.name if fact.call else f"#{fact.index}") for seq, row, fact in tools
    ]
    span = (max(seqs) - min(seqs) + 1) * 1.1 if seqs else 1  # matplotlib's 5% margins
    levels = _levels(labels, 11 * 72 * 0.85 / span)  # the axes' width in points, about
    for (seq, row, fact), (_, _, name), level in zip(tools, labels, levels, strict=True):
        colour = "#2a9d8f" if fact.success else "#e4572e"
        top.scatter([seq], [row], color=colour, zorder=3, s=30)
        top.annotate(
            name,
            (seq, row),
            fontsize=_LABEL_SIZE,
            xytext=(3, -9 - _LEVEL * level),
            textcoords="offset points",
            color=colour,
        )
    for e in entries:
        if isinstance(e.fact, f.StepStarted):
            top.axvline(e.seq, color="#dee2e6", lw=0.8, zorder=0)
            top.text(
                e.seq,
                1.01,
                f"step {e.fact.step}",
                fontsize=6.5,
                color="#6c757d",
                transform=top.get_xaxis_transform(),
            )
    heading = title or "state per fact (tool calls: green ok, red failed)"
    top.set_title(_wrapped(heading), fontsize=10, pad=14)
    calls = [(e.seq, e.fact.response.usage) for e in entries if isinstance(e.fact, f.LlmResponded)]
    inputs = [u.input_tokens if u else 0 for _, u in calls]
    outputs = [u.output_tokens if u else 0 for _, u in calls]
    xs = [seq for seq, _ in calls]
    middle.bar(xs, inputs, color="#8d99ae", label="input")
    middle.bar(xs, outputs, bottom=inputs, color="#ef8354", label="output")
    middle.set_ylabel("tokens", fontsize=8)
    middle.legend(fontsize=7, loc="upper left")
    timed = [
        (e.seq, e.metrics.get("latency_ms", e.metrics.get("duration_ms")), e.event)
        for e in entries
        if e.metrics
    ]
    bottom.bar(
        [t[0] for t in timed],
        [t[1] or 0 for t in timed],
        color=["#4f5d75" if t[2] == "LlmResponded" else "#2a9d8f" for t in timed],
    )
    bottom.set_ylabel("ms (LLM, tool)", fontsize=8)
    bottom.set_xlabel("fact seq", fontsize=8)
    fig.tight_layout()
    return fig


_LABEL_SIZE = 6.5
_LEVEL = 8
"""Points between two levels of tool labels under the same state."""


def _levels(labels: list[tuple[int, int, str]], per_seq: float) -> list[int]:
    """For tool labels at (seq, row, text), in order: the level of each under its point (0 the
    first line, 1 the next ...), the lowest where it runs into no earlier label of its row, so
    that the names of tools called one after another (a parallel batch) do not overlap."""
    ends: dict[tuple[int, int], float] = {}  # (row, level): where its last label ends, in points
    levels = []
    for seq, row, text in labels:
        start = seq * per_seq + 3
        level = 0
        while ends.get((row, level), float("-inf")) > start:
            level += 1
        ends[(row, level)] = start + 0.62 * _LABEL_SIZE * len(text) + 4
        levels.append(level)
    return levels


def _wrapped(title: str, width: int = 110, lines: int = 2) -> str:
    """A title on at most `lines` lines, cut at a word with an ellipsis when longer."""
    text = textwrap.shorten(title, width * lines, placeholder=" …")
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))


@dataclass(frozen=True, slots=True)
class Stretch:
    """Facts `first`..`last` of a run, all in one state of one step: the timeline as text."""

    first: int
    last: int
    step: int
    state: str
    tools: tuple[str, ...] = ()
    """The tools that ran, in order: a failed one marked `(failed)`."""
    tokens: int = 0
    """Input and output tokens of the LLM calls."""
    ms: float = 0.0
    """How long the LLM calls and tools took, together."""


def stretches(entries: list[TraceEntry]) -> list[Stretch]:
    """The run as stretches of one state (what `agentsm timeline RUN` prints without --out):
    where each starts and ends, its step, the tools run, tokens and time spent there."""
    found: list[Stretch] = []
    for e in entries:
        last = found[-1] if found else None
        if last is None or (last.state, last.step) != (e.state, e.step):
            last = Stretch(e.seq, e.seq, e.step, e.state)
            found.append(last)
        tools, tokens = last.tools, last.tokens
        if isinstance(e.fact, f.ToolExecuted):
            name = e.fact.call.name if e.fact.call else f"#{e.fact.index}"
            tools += (name if e.fact.success else f"{name} (failed)",)
        elif isinstance(e.fact, f.LlmResponded) and e.fact.response.usage:
            usage = e.fact.response.usage
            tokens += usage.input_tokens + usage.output_tokens
        took = e.metrics.get("latency_ms", e.metrics.get("duration_ms")) or 0
        found[-1] = Stretch(
            last.first, e.seq, e.step, e.state, tools, tokens, last.ms + float(took)
        )
    return found
