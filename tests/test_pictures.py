"""Pictures from the library and the CLI: diagram (Mermaid, SVG, PNG), timeline, family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentsm import BuildError, LlmResponse, build_transition_table
from agentsm.pictures import (
    family_of,
    family_tree,
    path_of,
    save,
    state_diagram,
    stretches,
    timeline,
    to_mermaid,
)
from replay import branch_run
from replay.demo import demo_agent

from .test_cli import agentsm, ok


def demo_run(tmp_path: Path) -> tuple[object, str]:
    engine = demo_agent().store(tmp_path / "runs.db").build()
    engine.run()
    return engine, engine.run_id


def test_mermaid_marks_the_path_of_a_run(tmp_path: Path) -> None:
    engine, _ = demo_run(tmp_path)
    path = path_of(engine.trace().facts())  # type: ignore[attr-defined]
    assert path[("Observing", "Continue", "Planning")] == 3
    assert path[("Planning", "LlmParallelToolCalls", "ParallelActing")] == 1
    text = to_mermaid(build_transition_table(), path)
    assert "Observing --> Planning: Continue ×3" in text
    assert "Planning --> Reflecting: LowConfidence\n" in text  # not taken: no count
    assert (
        text.splitlines()[-1]
        == "    class Acting,Done,Idle,Observing,ParallelActing,Planning visited"
    )
    assert to_mermaid(build_transition_table()) == build_transition_table().to_mermaid()


def test_images_are_written_as_svg_and_png(tmp_path: Path) -> None:
    engine, run_id = demo_run(tmp_path)
    facts = engine.trace().facts()  # type: ignore[attr-defined]
    svg = save(state_diagram(build_transition_table(), path_of(facts), "demo"), tmp_path / "g.svg")
    assert svg.read_text().lstrip().startswith("<?xml") and "ParallelActing" in svg.read_text()
    png = save(timeline(engine.trace().entries()), tmp_path / "t.png")  # type: ignore[attr-defined]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    store = engine.store  # type: ignore[attr-defined]
    child = branch_run(
        store, run_id, at=26, llm_response=LlmResponse.final_answer("Paris, briefly.")
    ).run_id
    grandchild = branch_run(
        store, child, at=20, llm_response=LlmResponse.final_answer("Paris!!")
    ).run_id
    family = [(r.run_id, depth) for r, depth in family_of(store, grandchild)]
    assert family == [(run_id, 0), (child, 1), (grandchild, 2)]
    tree = save(family_tree(store, child), tmp_path / "family.svg")
    assert child in tree.read_text() and "at seq 24" in tree.read_text()
    with pytest.raises(BuildError, match="use a .svg or .png"):
        save(timeline([]), tmp_path / "t.gif")


def test_picture_commands(tmp_path: Path) -> None:
    ok(agentsm("demo", cwd=tmp_path))
    db = ["--db", "agentsm.db"]
    run_id = ok(agentsm(*db, "runs", cwd=tmp_path)).splitlines()[1].split()[0]
    assert ok(agentsm(*db, "graph", cwd=tmp_path)).startswith("stateDiagram-v2")
    assert "wrote run.svg" in ok(agentsm(*db, "graph", run_id, "--out", "run.svg", cwd=tmp_path))
    assert (tmp_path / "run.svg").read_text().count("Planning") >= 1
    ok(agentsm(*db, "graph", run_id, "--out", "run.mmd", cwd=tmp_path))
    assert "Continue ×3" in (tmp_path / "run.mmd").read_text()
    ok(agentsm(*db, "timeline", run_id, "--out", "run.png", cwd=tmp_path))
    assert (tmp_path / "run.png").read_bytes()[:4] == b"\x89PNG"
    ok(agentsm(*db, "family", run_id, "--out", "family.png", cwd=tmp_path))
    bad = agentsm(*db, "timeline", run_id, "--out", "run.jpg", cwd=tmp_path)
    assert bad.returncode == 2 and "use a .svg or .png" in bad.stderr


def test_the_timeline_keeps_tool_labels_apart_and_its_title_whole(tmp_path: Path) -> None:
    """Three batches of eight parallel calls: their names once ran into each other."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Annotation

    from agentsm import AgentBuilder, MockLlmCaller, ToolCall

    def lookup_population(city: str) -> str:
        """The population of a city."""
        return f"{city}: about a million"

    task = "Compare the populations of " + ", ".join(f"city number {n}" for n in range(40))
    batches = [
        LlmResponse.tool_calls(
            [ToolCall(name="lookup_population", args={"city": f"{b}{n}"}) for n in range(8)]
        )
        for b in "abc"
    ]
    answer = LlmResponse.final_answer("All forty cities compared, the largest first.")
    llm = MockLlmCaller([*batches, answer])
    engine = AgentBuilder(task).tool(lookup_population).llm(llm).store(tmp_path / "r.db").build()
    engine.run()
    fig = timeline(engine.trace().entries(), f"run {engine.run_id}: {task}")
    FigureCanvasAgg(fig).draw()
    top = fig.axes[0]
    labels = [t.get_window_extent() for t in top.texts if isinstance(t, Annotation)]
    assert len(labels) == 24
    assert not [(a, b) for i, a in enumerate(labels) for b in labels[i + 1 :] if a.overlaps(b)]
    title = top.title.get_text()
    assert title.startswith(f"run {engine.run_id}: Compare the populations")
    assert title.endswith(" …") and len(title.splitlines()) == 2  # wrapped, cut at a word
    assert fig.bbox.contains(*top.title.get_window_extent().p1)  # inside the picture
    engine.store.close()


def test_the_timeline_as_text_has_a_line_per_stretch_of_one_state(tmp_path: Path) -> None:
    engine, run_id = demo_run(tmp_path)
    parts = stretches(engine.trace().entries())  # type: ignore[attr-defined]
    parallel = next(s for s in parts if s.state == "ParallelActing")
    assert parallel.tools == ("search", "search") and parallel.ms > 0
    assert parts[0].state == "Idle" and parts[-1].state == "Done"
    assert sum(s.tokens for s in parts) == engine.memory.total_usage.total_tokens  # type: ignore[attr-defined]
    engine.store.close()  # type: ignore[attr-defined]
    db = ["--db", "runs.db"]
    text = ok(agentsm(*db, "timeline", run_id, cwd=tmp_path)).splitlines()
    assert text[0].startswith(f"run {run_id}: What is the capital of France")
    assert text[1].split() == ["seq", "step", "state", "tools", "tokens", "ms"]
    assert any(line.split()[2:5] == ["ParallelActing", "search,", "search"] for line in text)
    rows = json.loads(ok(agentsm(*db, "timeline", run_id, "--json", cwd=tmp_path)))
    assert rows[0] == {
        "first": 1,
        "last": parts[0].last,
        "step": 0,
        "state": "Idle",
        "tools": [],
        "tokens": 0,
        "ms": 0.0,
    }
    both = agentsm(*db, "timeline", run_id, "--json", "--out", "t.png", cwd=tmp_path)
    assert both.returncode == 2 and "give --out or --json, not both" in both.stderr


def custom_table() -> object:
    """The default table with a Verifying step, an audit branch and a part of its own."""
    return (
        build_transition_table()
        .without_rows(("Observing", "Continue"))
        .with_rows(
            {
                ("Observing", "Continue"): "Verifying",
                ("Verifying", "Verified"): "Planning",
                ("Verifying", "Doubtful"): "Planning",
                ("Verifying", "Escalate"): "Auditing",
                ("Auditing", "Audited"): "Done",
                ("Auditing", "Retry"): "Auditing",
                ("Archived", "Restore"): "Restored",
            }
        )
    )


def drawn_boxes(fig: object) -> dict[str, list[tuple[str, object]]]:
    """The boxes of the drawn texts, as rendered, by kind (state or edge label)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # type: ignore[arg-type]
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes: dict[str, list[tuple[str, object]]] = {"state": [], "edge-label": []}
    for text in fig.axes[0].texts:  # type: ignore[attr-defined]
        if text.get_gid() in boxes:
            patch = text.get_bbox_patch()
            boxes[text.get_gid()].append((text.get_text(), patch.get_window_extent(renderer)))
    return boxes


@pytest.mark.parametrize("name", ["default", "default with a path", "custom"])
def test_no_edge_label_overlaps_another_or_a_state(name: str, tmp_path: Path) -> None:
    table: object = custom_table() if name == "custom" else build_transition_table()
    path = None
    if name == "default with a path":
        engine, _ = demo_run(tmp_path)
        path = path_of(engine.trace().facts())  # type: ignore[attr-defined]
    fig = state_diagram(table, path, title=name)  # type: ignore[arg-type]
    boxes = drawn_boxes(fig)
    pairs = {(str(s), str(d)) for (s, _), d in table.items()}  # type: ignore[attr-defined]
    assert len(boxes["edge-label"]) == len(pairs)  # one label per pair of states
    assert len(boxes["state"]) == len({s for p in pairs for s in p} | {"Idle"})
    labels, states = boxes["edge-label"], boxes["state"]
    clashes = [
        (a, b)
        for i, (a, box_a) in enumerate(labels)
        for b, box_b in labels[i + 1 :] + states
        if box_a.overlaps(box_b)  # type: ignore[attr-defined]
    ]
    assert clashes == []
    assert not [
        (a, b)
        for i, (a, box_a) in enumerate(states)
        for b, box_b in states[i + 1 :]
        if box_a.overlaps(box_b)  # type: ignore[attr-defined]
    ]
