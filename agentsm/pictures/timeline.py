"""A run's timeline: the state at every fact, tool calls, tokens per LLM call, durations."""

from __future__ import annotations

from typing import Any

from .. import facts as f
from ..trace import TraceEntry
from ..types import State
from ._mpl import figure

__all__ = ["timeline"]

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
    for e in entries:
        if isinstance(e.fact, f.ToolExecuted):
            colour = "#2a9d8f" if e.fact.success else "#e4572e"
            top.scatter([e.seq], [rank[e.state]], color=colour, zorder=3, s=30)
            top.annotate(
                e.fact.call.name if e.fact.call else f"#{e.fact.index}",
                (e.seq, rank[e.state]),
                fontsize=6.5,
                xytext=(3, -9),
                textcoords="offset points",
                color=colour,
            )
        elif isinstance(e.fact, f.StepStarted):
            top.axvline(e.seq, color="#dee2e6", lw=0.8, zorder=0)
            top.text(
                e.seq,
                1.01,
                f"step {e.fact.step}",
                fontsize=6.5,
                color="#6c757d",
                transform=top.get_xaxis_transform(),
            )
    top.set_title(title or "state per fact (tool calls: green ok, red failed)", fontsize=10, pad=14)
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
