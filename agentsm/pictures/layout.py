"""Where the state diagram puts things: a layered (Sugiyama) layout by grandalf, the method of
Graphviz's dot, in which each edge label is a node of its own between its two states, so that
labels get space like states do and never overlap one another. Units are points."""

from __future__ import annotations

import importlib
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import BuildError

__all__ = ["LABEL_FONT", "LABEL_PAD", "STATE_FONT", "STATE_PAD", "Placed", "lay_out", "text_size"]

STATE_FONT = 9.0
STATE_PAD = 0.45
LABEL_FONT = 6.5
LABEL_PAD = 0.2
X_SPACE = 16.0
Y_SPACE = 20.0

Edge = tuple[str, str]
Point = tuple[float, float]
Size = tuple[float, float]


def text_size(text: str, fontsize: float, *, bold: bool = False, pad: float = 0.0) -> Size:
    """Width and height in points of a text with its box (`pad` in fractions of the font
    size, as matplotlib's bbox takes it), measured with the renderer that draws it."""
    from matplotlib.font_manager import FontProperties

    agg: Any = importlib.import_module("matplotlib.backends.backend_agg")  # untyped
    renderer = agg.RendererAgg(10, 10, 72)  # at 72 dpi a pixel is a point
    prop = FontProperties(size=fontsize, weight="bold" if bold else "normal")
    lines = text.split("\n")
    width = max(renderer.get_text_width_height_descent(x, prop, ismath=False)[0] for x in lines)
    _, line, descent = renderer.get_text_width_height_descent("lp", prop, ismath=False)
    height = line + (len(lines) - 1) * fontsize * 1.2 + descent
    border = 2 * pad * fontsize + 2.0
    return width + border, height + border


class _View:
    """What grandalf needs of a vertex: its size, and where it put it."""

    def __init__(self, size: Size) -> None:
        self.w, self.h = size
        self.xy: Point = (0.0, 0.0)


class _EdgeView:
    def __init__(self) -> None:
        self.points: list[Point] = []
        self.head_angle = 0.0

    def setpath(self, points: list[Point]) -> None:
        self.points = [(float(x), float(y)) for x, y in points]


@dataclass
class Placed:
    """Centres of states and labels, each edge's polyline (through its label), and sizes."""

    states: dict[str, Point] = field(default_factory=dict)
    labels: dict[Edge, Point] = field(default_factory=dict)
    routes: dict[Edge, list[Point]] = field(default_factory=dict)
    sizes: dict[Hashable, Size] = field(default_factory=dict)

    def boxes(self) -> dict[Hashable, tuple[float, float, float, float]]:
        """(x0, y0, x1, y1) of every state (by name) and label (by edge)."""
        boxes: dict[Hashable, tuple[float, float, float, float]] = {}
        for key, (x, y) in [*self.states.items(), *self.labels.items()]:
            w, h = self.sizes[key]
            boxes[key] = (x - w / 2, y - h / 2, x + w / 2, y + h / 2)
        return boxes

    def bounds(self, margin: float = 0.0) -> tuple[Point, Point]:
        """The corners of the smallest box around everything placed."""
        boxes = list(self.boxes().values())
        points = [p for route in self.routes.values() for p in route]
        x0 = min([b[0] for b in boxes] + [p[0] for p in points]) - margin
        y0 = min([b[1] for b in boxes] + [p[1] for p in points]) - margin
        x1 = max([b[2] for b in boxes] + [p[0] for p in points]) + margin
        y1 = max([b[3] for b in boxes] + [p[1] for p in points]) + margin
        return (x0, y0), (x1, y1)


def _grandalf() -> Any:
    try:  # grandalf ships no type hints: its modules are Any here
        graphs, layouts, routing = (
            importlib.import_module(f"grandalf.{name}") for name in ("graphs", "layouts", "routing")
        )
    except ImportError as e:  # pragma: no cover - grandalf comes with the pictures extra
        raise BuildError(
            "Drawing the state diagram needs grandalf: pip install 'agentsm[pictures]'."
        ) from e
    return graphs, layouts, routing


def lay_out(states: Mapping[str, Size], labels: Mapping[Edge, Size]) -> Placed:
    """Place states (name -> size) and the labels of the edges between them (edge -> size)
    in layers going down from Idle; unconnected parts of the graph sit side by side."""
    graphs, layouts, routing = _grandalf()
    vertex: dict[Hashable, Any] = {}
    for key, size in [*states.items(), *labels.items()]:
        vertex[key] = graphs.Vertex(key)
        vertex[key].view = _View(size)
    halves: dict[Edge, tuple[Any, Any]] = {}
    for src, dst in labels:
        into = graphs.Edge(vertex[src], vertex[(src, dst)])
        out = graphs.Edge(vertex[(src, dst)], vertex[dst])
        into.view, out.view = _EdgeView(), _EdgeView()
        halves[(src, dst)] = (into, out)
    graph = graphs.Graph(list(vertex.values()), [e for pair in halves.values() for e in pair])
    left = 0.0
    for part in sorted(graph.C, key=lambda c: "Idle" not in [v.data for v in c.sV]):
        sugiyama = layouts.SugiyamaLayout(part)
        sugiyama.xspace, sugiyama.yspace = X_SPACE, Y_SPACE
        sugiyama.route_edge = routing.route_with_lines
        roots = [v for v in part.sV if v.data == "Idle"] or None
        sugiyama.init_all(roots=roots)
        sugiyama.draw()
        placed = list(part.sV)
        x0 = min(v.view.xy[0] - v.view.w / 2 for v in placed)
        x1 = max(v.view.xy[0] + v.view.w / 2 for v in placed)
        shift = left - x0
        for v in placed:
            v.view.xy = (v.view.xy[0] + shift, v.view.xy[1])
        for e in part.sE:
            e.view.points = [(x + shift, y) for x, y in e.view.points]
        left += x1 - x0 + 3 * X_SPACE
    result = Placed(sizes={k: (v.view.w, v.view.h) for k, v in vertex.items()})
    result.states = {k: vertex[k].view.xy for k in states}
    result.labels = {k: vertex[k].view.xy for k in labels}
    for edge, (into, out) in halves.items():
        centre = vertex[edge].view.xy
        if edge[0] == edge[1]:
            result.routes[edge] = _loop(vertex[edge[0]].view, vertex[edge].view)
        else:
            result.routes[edge] = [*into.view.points[:-1], centre, *out.view.points[1:]]
    return result


def _loop(state: _View, label: _View) -> list[Point]:
    """A row from a state back to itself: out of one side of its box, through its label,
    back into the other side."""
    (sx, sy), (lx, ly) = state.xy, label.xy
    side = 1.0 if ly >= sy else -1.0
    edge_y = sy + side * state.h / 2
    return [
        (sx - state.w / 4, edge_y),
        (lx - label.w / 4, ly),
        (lx + label.w / 4, ly),
        (sx + state.w / 4, edge_y),
    ]
