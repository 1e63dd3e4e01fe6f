"""Live runs: each fact as another process records it, as Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from ..source import open_store
from ..tail import follow
from .api import ViewerDep
from .views import entry_of

__all__ = ["router"]

router = APIRouter(prefix="/api", tags=["live"])


@router.get("/runs/{run}/live", response_class=StreamingResponse)
async def live(
    viewer: ViewerDep,
    run: str,
    after: Annotated[int, Query(ge=0, description="send the facts after this seq")] = 0,
) -> StreamingResponse:
    """A `text/event-stream` of the run's facts after `after` as they are recorded (one
    `fact` event each, JSON as in the run's facts list), then an `end` event once the run
    has ended (done, failed or aborted). Driven by `replay.tail.follow`: nothing is missed
    or sent twice. Each stream reads the log through a store of its own."""
    store = open_store(viewer.db, read_only=True)  # its own: waiting on it is per store
    try:
        facts = follow(store, run, after_seq=after, poll=0.5)  # refuses an unknown run here
    except BaseException:
        store.close()
        raise

    async def stream() -> AsyncIterator[str]:
        try:
            yield ": following\n\n"
            async for fact in facts:
                yield f"event: fact\ndata: {json.dumps(entry_of(fact.entry))}\n\n"
            yield "event: end\ndata: {}\n\n"
        finally:
            store.close()

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
    )
