"""The read side of the JSON API: the catalog, search, one run (facts, diagram, timeline),
memory and conversation at a seq, lineage and diffs, threads. Nothing here writes to the
log."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from eventstore import Searchable

from ..cli.common import parse_since
from ..cli.listing import SEARCHED, STATUSES, select
from ..conversation import conversation_at
from ..recording import Recording
from ..source import agent_of
from ..timetravel import memory_at
from . import threads, views

__all__ = ["router", "viewer_of"]

router = APIRouter(prefix="/api", tags=["read"])


def viewer_of(request: Request) -> Any:
    """The `Viewer` the app serves (its log and settings)."""
    return request.app.state.viewer


ViewerDep = Annotated[Any, Depends(viewer_of)]


@router.get("/info")
def info(viewer: ViewerDep) -> dict[str, Any]:
    """What the viewer shows: the log, whether it may write, and whether decided runs go on
    here (a builder was given)."""
    return {
        "db": viewer.db,
        "allow_write": viewer.allow_write,
        "builder": viewer.builder_spec,
        "statuses": list(STATUSES),
        "search": isinstance(viewer.store, Searchable),
    }


@router.get("/runs")
def runs(
    viewer: ViewerDep,
    status: Annotated[str | None, Query(description=f"one of {', '.join(STATUSES)}")] = None,
    model: Annotated[str | None, Query(description="the model's exact name")] = None,
    task: Annotated[str | None, Query(description="the task contains this text (any case)")] = None,
    since: Annotated[
        str | None, Query(description="last fact within a duration (2h, 1d) or since a date")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """The catalog, newest first, filtered as `agentsm runs` filters it, one page at a time
    (`next_offset` is the offset of the next page, null on the last). Nothing is folded."""
    found = select(
        viewer.store,
        status=status or None,
        model=model or None,
        task=task or None,
        since=parse_since(since or None),
        limit=offset + limit + 1,
    )
    newest = list(reversed(found))[offset:]
    page = newest[:limit]
    return {
        "runs": [views.record_of(r) for r in page],
        "offset": offset,
        "next_offset": offset + limit if len(newest) > limit else None,
    }


@router.get("/search")
def search(
    viewer: ViewerDep, q: Annotated[str, Query(min_length=1)], limit: int = 50
) -> dict[str, Any]:
    """Full-text search over tasks, LLM text, observations and errors: the matching facts,
    best first, each with its matching text and `[` `]` around the words found (`unindexed`:
    facts not in the search index yet, read one by one: the viewer opens the log read-only)."""
    store = viewer.store
    if not isinstance(store, Searchable):
        return {"available": False, "hits": [], "unindexed": 0}
    hits = store.search(q, kinds=SEARCHED, limit=limit)
    return {
        "available": True,
        "hits": [{"run_id": r, "seq": s, "kind": k, "snippet": t} for r, s, k, t in hits],
        "unindexed": store.unindexed(),
    }


@router.get("/runs/{run}")
def run(viewer: ViewerDep, run: str) -> dict[str, Any]:
    """One run (an id or a unique prefix): its catalog entry, its state now, the calls it
    waits on, and its facts as `agentsm show` lists them (with each fact in full)."""
    return views.run_detail(viewer.store, run)


@router.get("/runs/{run}/diagram")
def diagram(viewer: ViewerDep, run: str) -> dict[str, Any]:
    """The transition table laid out as a state diagram (points), the rows the run took and
    how often, and its path in order. The table is the builder's (with `--builder`) or the
    default one, plus any row the run took that it lacks."""
    table = None
    recording = Recording.load(viewer.store, run)
    if viewer.builder is not None:
        agent = agent_of(viewer.store, recording.definition, viewer.builder)  # a child's own
        table = agent(recording.definition.task).build_table()
    return views.diagram_of(recording, table)


@router.get("/runs/{run}/timeline")
def timeline(viewer: ViewerDep, run: str) -> dict[str, Any]:
    """The run in time: states, LLM calls (tokens, latency), tool calls (duration, outcome)."""
    return views.timeline_of(Recording.load(viewer.store, run).entries)


@router.get("/runs/{run}/memory")
def memory(viewer: ViewerDep, run: str, seq: Annotated[int, Query(ge=1)]) -> dict[str, Any]:
    """The run's memory and state right after fact `seq` (its log folded up to it)."""
    run_id = viewer.store.resolve(run)
    mem, state = memory_at(viewer.store, run_id, seq)
    return {
        "run_id": run_id,
        "seq": seq,
        "state": str(state),
        "memory": mem.model_dump(mode="json"),
    }


@router.get("/runs/{run}/conversation")
def conversation(viewer: ViewerDep, run: str, seq: Annotated[int, Query(ge=1)]) -> dict[str, Any]:
    """The exact messages the LLM was sent at `seq` (`agentsm memory --at SEQ --messages`)."""
    sent = conversation_at(viewer.store, viewer.store.resolve(run), seq)
    return {
        "run_id": sent.run_id,
        "seq": sent.seq,
        "messages": sent.messages,
        "request_seq": sent.request_seq,
        "note": sent.note,
    }


@router.get("/runs/{run}/lineage")
def lineage(viewer: ViewerDep, run: str) -> dict[str, Any]:
    """The run's family from its root: each run with its depth, where it parted from its
    parent (`branch_seq`), what the branch changed, and, for a sub-agent run, `subagent`."""
    return {"run_id": viewer.store.resolve(run), "family": views.lineage_of(viewer.store, run)}


@router.get("/diff")
def diff(viewer: ViewerDep, a: str, b: str) -> dict[str, Any]:
    """Two runs compared (`agentsm diff`): how they relate, where they part, each one's facts
    from there, and their outcomes side by side."""
    return views.diff_of(viewer.store, a, b)


@router.get("/threads")
def thread_list(
    viewer: ViewerDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """The conversations of the log, the last updated first, one page at a time, each as
    `agentsm threads --json` gives it (turns, status, last run, message, answer, error,
    updated, the thread and turn it was branched from); read from the catalog alone."""
    found = threads.thread_list(viewer.store)[offset:]
    return {
        "threads": found[:limit],
        "offset": offset,
        "next_offset": offset + limit if len(found) > limit else None,
    }


@router.get("/threads/{thread}")
def thread(viewer: ViewerDep, thread: str) -> dict[str, Any]:
    """One thread as a conversation: its entry in the list, each turn in order (message,
    what was said while it ran, answer or error, status, run, what it waits on) and the
    threads branched from it. 404 for a thread the log does not hold."""
    return threads.thread_detail(viewer.store, thread)
