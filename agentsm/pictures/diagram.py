"""The transition table as a state diagram (Mermaid text or an image), with a run's path."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .. import facts as f
from ..types import TERMINAL_STATES, State
from ._mpl import figure
from .layout import LABEL_FONT, LABEL_PAD, STATE_FONT, STATE_PAD, lay_out, text_size

__all__ = ["path_of", "state_diagram", "to_mermaid"]

Edge = tuple[str, str]


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


def state_diagram(
    table: Mapping[tuple[str, str], str],
    path: Counter[tuple[str, str, str]] | None = None,
    title: str = "",
) -> Any:
    """A matplotlib Figure of the table, laid out by a layered graph layout (`layout.py`) in
    which every edge label is a box of its own, so that no two labels overlap; a run's `path`
    is drawn thick, with counts. Texts carry a gid ("state", "edge-label") for checks."""
    states = {State.Idle, *(s for s, _ in table), *table.values()}
    edges: dict[Edge, list[str]] = {}
    for (src, event), dst in table.items():
        edges.setdefault((str(src), str(dst)), []).append(str(event))
    taken: Counter[Edge] = Counter()
    for (src, _, dst), n in (path or Counter()).items():
        taken[(str(src), str(dst))] += n
    visited = {s for edge in taken for s in edge}
    labels = {
        edge: "\n".join(events) + (f"  ×{taken[edge]}" if taken.get(edge) else "")
        for edge, events in edges.items()
    }
    placed = lay_out(
        {str(s): text_size(str(s), STATE_FONT, bold=True, pad=STATE_PAD) for s in states},
        {edge: text_size(label, LABEL_FONT, pad=LABEL_PAD) for edge, label in labels.items()},
    )
    top = 22.0 if title else 0.0
    (x0, y0), (x1, y1) = placed.bounds(margin=12.0)
    fig = figure((x1 - x0) / 72, (y1 - y0 + top) / 72)  # one unit is one point
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y1 + top, y0)  # layers go down the page
    ax.axis("off")
    if title:
        ax.text((x0 + x1) / 2, y0 - top / 2, title, ha="center", va="center", fontsize=11)
    hot, cold = "#e4572e", "#8d99ae"
    for edge, label in labels.items():
        n = taken.get(edge, 0)
        colour, width = (hot, 2.6) if n else (cold, 1.0)
        points = placed.routes[edge]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs[:-1], ys[:-1], color=colour, lw=width, solid_capstyle="round")
        ax.annotate(
            "",
            xy=points[-1],
            xytext=points[-2],
            arrowprops={
                "arrowstyle": "-|>",
                "color": colour,
                "lw": width,
                "shrinkA": 0,
                "shrinkB": 0,
            },
        )
        x, y = placed.labels[edge]
        ax.text(
            x,
            y,
            label,
            ha="center",
            va="center",
            fontsize=LABEL_FONT,
            color=colour,
            gid="edge-label",
            bbox={"boxstyle": f"round,pad={LABEL_PAD}", "fc": "white", "ec": "none"},
        )
    for name, (x, y) in placed.states.items():
        terminal = name in TERMINAL_STATES
        face = "#ffd9b3" if name in visited else ("#e9ecef" if terminal else "white")
        ax.text(
            x,
            y,
            name,
            ha="center",
            va="center",
            fontsize=STATE_FONT,
            fontweight="bold",
            gid="state",
            bbox={
                "boxstyle": f"{'square' if terminal else 'round'},pad={STATE_PAD}",
                "fc": face,
                "ec": hot if name in visited else "#2b2d42",
                "lw": 2.0 if name in visited else 1.2,
            },
        )
    return fig
