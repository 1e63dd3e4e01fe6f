"""Live runs: each fact as another process records it, as Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

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
    or sent twice."""
    facts = follow(viewer.store, run, after_seq=after, poll=0.5)  # refuses an unknown run here

    async def stream() -> AsyncIterator[str]:
        yield ": following\n\n"
        async for fact in facts:
            yield f"event: fact\ndata: {json.dumps(entry_of(fact.entry))}\n\n"
        yield "event: end\ndata: {}\n\n"

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
    )
