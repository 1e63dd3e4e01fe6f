"""The ASGI app of `agentsm serve`: conversations with the user's agent over HTTP, JSON in,
JSON or server-sent events out, described in its OpenAPI document (/openapi.json, /docs)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Header, Query, Request, status
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic.json_schema import models_json_schema
from starlette.middleware.trustedhost import TrustedHostMiddleware

from agentsm import AgentError, ThreadBusy
from eventstore import StoreError, UnknownRun

from .drives import Drive, one_line
from .events import EVENTS, encode, item_schema, stream_description
from .models import (
    AnswerBody,
    DecisionBody,
    MessageBody,
    NewThread,
    Problem,
    SteerBody,
    Steered,
    StopBody,
    Stopped,
    ThreadDetail,
    ThreadInfo,
    TurnInfo,
)
from .service import Refused, Service, ThreadNotFound

__all__ = ["LOOPBACK_HOSTS", "create_app"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")
"""The host names a server on the loopback interface answers to (as the viewer's)."""

DESCRIPTION = """Conversations with your agent: each thread is a series of runs, one per user
message (a turn), recorded in the log as `thread.send` records them, so that `agentsm
threads`, `agentsm show --thread ID` and `agentsm replay --thread ID` work on them.

Posting a message streams the turn as server-sent events until it ends or waits for a
person; answering its question, deciding its approval or resuming it streams the rest of
the same turn. A client that leaves does not stop the turn: read its events again from
`GET /threads/{thread_id}/runs/{run_id}/events`.

Errors are JSON `{"detail": "..."}`: 404 for an unknown thread or run, 409 when the thread
cannot take the request now (the detail says what to do), 422 for a bad body (nothing is
recorded)."""

NOT_FOUND = {
    "model": Problem,
    "description": "No such thread (or turn): the detail says where to look.",
}
CONFLICT = {
    "model": Problem,
    "description": "The thread cannot take this now (a turn runs, waits or has ended): the "
    "detail says what to do.",
}


def _streamed(what: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI responses of an endpoint that answers with a stream of events."""
    return {
        200: {
            "description": f"{what}\n\n{stream_description()}",
            "content": {
                "text/event-stream": {"schema": {"type": "string"}, "itemSchema": item_schema()}
            },
        },
        404: NOT_FOUND,
        409: CONFLICT,
    }


def _events(drive: Drive, after: int = 0) -> StreamingResponse:
    async def wire() -> AsyncIterator[str]:
        async for n, event in drive.follow(after):
            yield encode(n, event)

    return StreamingResponse(
        wire(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


router = APIRouter(tags=["threads"])


@router.get("/threads", response_model=list[ThreadInfo])
def list_threads(
    request: Request,
    limit: Annotated[int, Query(ge=0, le=10_000, description="at most this many (0: all)")] = 50,
) -> list[ThreadInfo]:
    """The threads of the log, the last updated first (read from the catalog: no run is
    folded), with those started here that have no turn yet."""
    return _service(request).threads(limit)


@router.post(
    "/threads",
    response_model=ThreadInfo,
    status_code=status.HTTP_201_CREATED,
    responses={409: CONFLICT},
)
def start_thread(request: Request, body: Annotated[NewThread | None, Body()] = None) -> ThreadInfo:
    """Start a thread: its id (the one given, or a new one). Nothing is recorded until its
    first message (`POST /threads/{thread_id}/messages`); a thread of the log goes on with
    its next message, without this."""
    return _service(request).start(body.thread_id if body is not None else None)


@router.get("/threads/{thread_id}", response_model=ThreadDetail, responses={404: NOT_FOUND})
def read_thread(request: Request, thread_id: str) -> ThreadDetail:
    """A thread: its turns in order (their runs, as the catalog shows them), the
    conversation (each turn's message and answer, or error), and what its last turn waits
    for (`pending`)."""
    return _service(request).thread(thread_id)


@router.post(
    "/threads/{thread_id}/messages",
    response_class=StreamingResponse,
    responses=_streamed("The turn's events, as they happen, until it ends or waits."),
)
async def post_message(request: Request, thread_id: str, body: MessageBody) -> StreamingResponse:
    """Send the thread its next message: a turn, recorded and run with your agent, streamed
    until it ends (`answer` or `error`, then `end`) or waits for a person (`question` or
    `approval`, then `end` with status waiting). 409 while the thread's last turn has not
    ended."""
    drive = await _service(request).send(thread_id, body.text, body.image_list())
    return _events(drive)


@router.post(
    "/threads/{thread_id}/answer",
    response_class=StreamingResponse,
    responses=_streamed("The rest of the turn, once nothing else waits."),
)
async def answer_question(request: Request, thread_id: str, body: AnswerBody) -> StreamingResponse:
    """Answer the question the thread's last turn asked (as `agentsm answer` does): the
    answer is recorded, and the turn goes on here, streamed in this response. While other
    questions or approvals still wait, the stream names them and ends (status waiting)."""
    drive = await _service(request).answer(thread_id, body.text, body.call)
    return _events(drive)


@router.post(
    "/threads/{thread_id}/decision",
    response_class=StreamingResponse,
    responses=_streamed("The rest of the turn, once nothing else waits."),
)
async def decide_approval(
    request: Request, thread_id: str, body: DecisionBody
) -> StreamingResponse:
    """Approve, reject or modify the calls the thread's last turn waits on (as `agentsm
    approve`, `reject` and `modify` do): recorded, and the turn goes on here, streamed in
    this response. While others still wait, the stream names them and ends (status waiting)."""
    drive = await _service(request).decide(
        thread_id, body.verdict, call=body.call, args=body.args, note=body.note
    )
    return _events(drive)


@router.post(
    "/threads/{thread_id}/resume",
    response_class=StreamingResponse,
    responses=_streamed("The rest of the turn."),
)
async def resume_turn(request: Request, thread_id: str) -> StreamingResponse:
    """Continue the thread's last turn where it stopped (stopped, or left by a server that
    stopped), as `agentsm resume` does, streamed in this response."""
    drive = await _service(request).resume(thread_id)
    return _events(drive)


@router.post(
    "/threads/{thread_id}/steer",
    response_model=Steered,
    status_code=status.HTTP_202_ACCEPTED,
    responses={404: NOT_FOUND, 409: CONFLICT},
)
def steer_turn(request: Request, thread_id: str, body: SteerBody) -> Steered:
    """Send the turn under way a message (as `agentsm steer` does): its driver takes it at
    its next transition (the turn's stream sends `steered`) and its LLM reads it before its
    next call. A turn that waits takes it when it goes on."""
    return _service(request).steer(thread_id, body.text)


@router.post(
    "/threads/{thread_id}/stop",
    response_model=Stopped,
    status_code=status.HTTP_202_ACCEPTED,
    responses={404: NOT_FOUND, 409: CONFLICT},
)
def stop_turn(
    request: Request, thread_id: str, body: Annotated[StopBody | None, Body()] = None
) -> Stopped:
    """Stop the turn under way (as `agentsm stop` does): it stops at its next transition
    (its stream sends `stopped`, then `end` with status stopped); a turn nobody drives
    (waiting) is stopped at once. `POST /threads/{thread_id}/resume` goes on from there."""
    return _service(request).stop(thread_id, body.reason if body is not None else "")


@router.get(
    "/threads/{thread_id}/runs/{run_id}", response_model=TurnInfo, responses={404: NOT_FOUND}
)
def read_turn(request: Request, thread_id: str, run_id: str) -> TurnInfo:
    """One turn of the thread: its run, as the catalog shows it."""
    return _service(request).turn(thread_id, run_id)


@router.get(
    "/threads/{thread_id}/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses=_streamed(
        "The events of the turn's last stretch driven by this server (from the start, or "
        "after `after`), as they come; for a turn not driven here, how it stands."
    ),
)
def follow_turn(
    request: Request,
    thread_id: str,
    run_id: str,
    after: Annotated[int, Query(ge=0, description="skip the first `after` events")] = 0,
    last_event_id: Annotated[
        int | None, Header(ge=0, description="as `after`: sent by a reconnecting EventSource")
    ] = None,
) -> StreamingResponse:
    """Follow a turn: the events of its last stretch driven by this server (a message, an
    answer, a decision or a resume), again from the start or after the event numbered
    `after`, then the rest as they come: a client that left reads here what it missed. For
    a turn not driven by this server, or changed since its stretch here ended (answered,
    stopped), the stream says how it stands: what it waits for, then `end` with its
    status."""
    drive = _service(request).drive_of(thread_id, run_id)
    return _events(drive, last_event_id if last_event_id is not None else after)


def create_app(service: Service, *, hosts: Sequence[str] = LOOPBACK_HOSTS) -> FastAPI:
    """The app serving `service`'s conversations; requests naming another host than `hosts`
    are refused (a web page elsewhere cannot reach your agent through a name it points at
    127.0.0.1; give `["*"]` to answer any)."""
    from agentsm import __version__

    app = FastAPI(
        title="agentsm serve",
        summary="Conversations with an agent, every turn recorded, replayable.",
        description=DESCRIPTION,
        version=__version__,
    )
    app.state.service = service
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))

    def problem(code: int) -> Any:
        async def handler(request: Request, error: Exception) -> JSONResponse:
            return JSONResponse({"detail": one_line(error)}, status_code=code)

        return handler

    app.add_exception_handler(ThreadNotFound, problem(404))
    app.add_exception_handler(UnknownRun, problem(404))
    app.add_exception_handler(Refused, problem(409))
    app.add_exception_handler(ThreadBusy, problem(409))
    app.add_exception_handler(StoreError, problem(409))
    app.add_exception_handler(AgentError, problem(500))
    app.include_router(router)

    def openapi() -> dict[str, Any]:
        """The document, with the payload of every event in its components."""
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            _, defs = models_json_schema(
                [(model, "serialization") for model in EVENTS.values()],
                ref_template="#/components/schemas/{model}",
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(defs["$defs"])
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
