"""A run family: a run, the runs branched from it and its sub-agent runs, and where each one
parted from (or was started by) its parent."""

from __future__ import annotations

from typing import Any

from eventstore import EventStore, RunRecord, UnknownRun

from ..subagent import subagent_of
from ._mpl import figure

__all__ = ["family_of", "family_tree"]


def family_of(store: EventStore, run_id: str) -> list[tuple[RunRecord, int]]:
    """The whole family of `run_id` (an id or a unique prefix) from its root, depth first, with
    each run's depth: the runs branched from a run and its sub-agent runs (`subagent_of` tells
    them apart), each under its catalog parent. Found generation by generation through the
    catalog's parent index (one query per generation), never by reading a log."""
    root = store.run(store.resolve(run_id))
    while root.parent_id:
        try:
            root = store.run(root.parent_id)
        except UnknownRun:  # a parent not in this log (an imported branch): the tree starts here
            break
    children: dict[str, list[RunRecord]] = {}
    generation = [root.run_id]
    seen = {root.run_id}
    while generation:
        found = [
            r
            for at in range(0, len(generation), 500)  # a bounded list of ids per query
            for r in store.runs(parents=generation[at : at + 500])
            if r.run_id not in seen
        ]
        for r in found:
            children.setdefault(r.parent_id or "", []).append(r)
            seen.add(r.run_id)
        generation = [r.run_id for r in found]
    out: list[tuple[RunRecord, int]] = []

    def walk(run: RunRecord, depth: int) -> None:
        out.append((run, depth))
        for child in sorted(children.get(run.run_id, []), key=lambda c: c.branch_seq or 0):
            walk(child, depth + 1)

    walk(root, 0)
    return out


def family_tree(store: EventStore, run_id: str, labels: dict[str, str] | None = None) -> Any:
    """A matplotlib Figure of the family: one box per run (id, status, an optional label),
    an edge per branch marked with the seq where it parted, and a dashed edge per sub-agent
    run marked with the tool and the seq of the call that started it."""
    family = family_of(store, run_id)
    fig = figure(10, 1.0 + 0.9 * len(family))
    ax = fig.add_subplot()
    ax.axis("off")
    ax.set_xlim(-0.5, 4 + max(d for _, d in family) * 2.5)
    ax.set_ylim(-len(family), 1)
    rows: dict[str, tuple[float, float]] = {}
    colours = {"done": "#2a9d8f", "failed": "#e4572e", "waiting": "#f4a261", "aborted": "#e4572e"}
    for i, (run, depth) in enumerate(family):
        x, y = depth * 2.5, -i
        rows[run.run_id] = (x, y)
        extra = (labels or {}).get(run.run_id, "")
        text = f"{run.run_id}  [{run.status}]" + (f"\n{extra[:60]}" if extra else "")
        ax.text(
            x,
            y,
            text,
            fontsize=8,
            va="center",
            bbox={
                "boxstyle": "round,pad=0.35",
                "fc": "white",
                "ec": colours.get(run.status, "#2b2d42"),
                "lw": 2.2 if run.run_id == run_id else 1.2,
            },
        )
        if run.parent_id and run.parent_id in rows:
            px, py = rows[run.parent_id]
            tool = subagent_of(run)
            ax.annotate(
                "",
                xy=(x - 0.05, y),
                xytext=(px + 0.3, py - 0.25),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": "#8d99ae",
                    "connectionstyle": "angle,angleA=-90,angleB=180",
                    "linestyle": "--" if tool is not None else "-",
                },
            )
            edge = f"at seq {run.branch_seq}"
            if tool is not None:
                edge = f"sub-agent {tool}, call at seq {run.branch_seq}"
            ax.text(px + 0.4, y + 0.18, edge, fontsize=7, color="#6c757d")
    return fig
