"""The transition table as a state diagram (Mermaid text or an image), with a run's path."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .. import facts as f
from ..types import TERMINAL_STATES, State
from ._mpl import figure

__all__ = ["path_of", "state_diagram", "to_mermaid"]

Edge = tuple[str, str]

LAYOUT: dict[str, tuple[float, float]] = {
    State.Idle: (0.0, 3.0),
    State.Planning: (3.2, 3.0),
    State.Done: (3.2, 6.2),
    State.Error: (3.2, -0.4),
    State.WaitingForHuman: (7.0, 5.8),
    State.Acting: (7.0, 4.0),
    State.ParallelActing: (7.0, 2.0),
    State.Reflecting: (7.0, 0.0),
    State.Observing: (10.6, 3.0),
}


CURVES: dict[Edge, float] = {
    (State.Observing, State.Planning): -0.42,
    (State.Reflecting, State.Planning): 0.25,
    (State.Acting, State.Error): -0.15,
}
"""Edges of the default layout bent around the states in their way."""


def path_of(facts: Iterable[Any]) -> Counter[tuple[str, str, str]]:
    """How often a run took each row `(state, event, next state)`."""
    return Counter(
        (x.from_state, x.event, x.to_state) for x in facts if isinstance(x, f.Transitioned)
    )


def to_mermaid(
    table: Mapping[tuple[str, str], str], path: Counter[tuple[str, str, str]] | None = None
) -> str:
    """Mermaid `stateDiagram-v2` of the table; with a run's `path`, the rows it took carry
    their count and the states it visited are highlighted."""
    lines = ["stateDiagram-v2", f"    [*] --> {State.Idle}"]
    for (src, event), dst in table.items():
        times = path.get((src, event, dst), 0) if path else 0
        label = f"{event} ×{times}" if times else event
        lines.append(f"    {src} --> {dst}: {label}")
    for terminal in sorted(TERMINAL_STATES):
        lines.append(f"    {terminal} --> [*]")
    if path:
        visited = sorted({s for (src, _, dst) in path for s in (src, dst)})
        lines.append("    classDef visited fill:#ffd9b3,stroke:#e4572e,stroke-width:3px")
        lines.append(f"    class {','.join(visited)} visited")
    return "\n".join(lines)


def _positions(states: Iterable[str]) -> dict[str, tuple[float, float]]:
    pos = {s: LAYOUT[s] for s in states if s in LAYOUT}
    extra = sorted(s for s in states if s not in LAYOUT)
    for i, name in enumerate(extra):
        pos[name] = (1.4 + i * 2.6, -1.2)
    return pos


def state_diagram(
    table: Mapping[tuple[str, str], str],
    path: Counter[tuple[str, str, str]] | None = None,
    title: str = "",
) -> Any:
    """A matplotlib Figure of the table; a run's `path` is drawn thick, with counts."""
    states = {State.Idle, *(s for s, _ in table), *table.values()}
    pos = _positions(states)
    edges: dict[Edge, list[str]] = {}
    for (src, event), dst in table.items():
        edges.setdefault((src, dst), []).append(event)
    taken: Counter[Edge] = Counter()
    for (src, _, dst), n in (path or Counter()).items():
        taken[(src, dst)] += n
    visited = {s for edge in taken for s in edge}
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    fig = figure(max(9.0, (max(xs) - min(xs)) * 1.0 + 2.6), (max(ys) - min(ys)) * 1.0 + 1.8)
    ax = fig.add_subplot()
    ax.set_xlim(min(xs) - 1.3, max(xs) + 1.3)
    ax.set_ylim(min(ys) - 0.9, max(ys) + 0.9)
    ax.axis("off")
    ax.set_aspect("equal")
    if title:
        ax.set_title(title, fontsize=11)
    hot, cold = "#e4572e", "#8d99ae"
    for (src, dst), events in edges.items():
        n = taken.get((src, dst), 0)
        colour, width = (hot, 2.6) if n else (cold, 1.0)
        label = " | ".join(events) + (f"  ×{n}" if n else "")
        (x1, y1), (x2, y2) = pos[src], pos[dst]
        if src == dst:
            ax.annotate(
                "",
                xy=(x1 - 0.62, y1 - 0.28),
                xytext=(x1 - 0.62, y1 + 0.28),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": colour,
                    "lw": width,
                    "connectionstyle": "arc3,rad=1.4",
                },
            )
            ax.text(
                x1 - 0.95,
                y1 + 0.55,
                label.replace(" | ", "\n"),
                ha="right",
                fontsize=6.5,
                color=colour,
            )
            continue
        short = math.hypot(x2 - x1, y2 - y1) < 2.5
        rad = CURVES.get((src, dst), (0.7 if short else 0.25) if (dst, src) in edges else 0.08)
        ax.annotate(
            "",
            xy=(x2, y2),
            xytext=(x1, y1),
            arrowprops={
                "arrowstyle": "-|>",
                "color": colour,
                "lw": width,
                "shrinkA": 34,
                "shrinkB": 34,
                "connectionstyle": f"arc3,rad={rad}",
            },
        )
        dx, dy = x2 - x1, y2 - y1
        mx, my = (x1 + x2) / 2 + rad * dy / 2, (y1 + y2) / 2 - rad * dx / 2  # the arc's middle
        if math.hypot(dx, dy) < 2.5:
            label = label.replace(" | ", "\n")
        ax.text(
            mx,
            my,
            label,
            ha="center",
            va="center",
            fontsize=6.5,
            color=colour,
            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
        )
    for name, (x, y) in pos.items():
        terminal = name in TERMINAL_STATES
        face = "#ffd9b3" if name in visited else ("#e9ecef" if terminal else "white")
        edge = hot if name in visited else "#2b2d42"
        ax.text(
            x,
            y,
            name,
            ha="center",
            va="center",
            fontsize=9,
            fontweight="bold",
            bbox={
                "boxstyle": "round,pad=0.45" if not terminal else "square,pad=0.45",
                "fc": face,
                "ec": edge,
                "lw": 2.0 if name in visited else 1.2,
            },
        )
    return fig
