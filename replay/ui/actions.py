"""The write side of the JSON API, open only with `agentsm ui --allow-write`: a human's
decision on a waiting call, an answer to a question, a stop and a branch at a fact, recorded
by the functions the CLI's approve, reject, modify, answer, stop and branch use, so that the
log cannot tell where they came from."""

from __future__ import annotations

import threading
import warnings
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field

from agentsm import AgentError, LlmResponse

from ..branching import agent_llm, branch_run
from ..branchnotes import UnusedChange
from ..outside import answer, request_stop
from ..resuming import decide, pending_requests, resume_run
from ..source import open_store
from .api import ViewerDep

__all__ = ["AnswerRequest", "BranchRequest", "DecisionRequest", "StopRequest", "router"]

router = APIRouter(prefix="/api", tags=["write (--allow-write)"])

READ_ONLY = (
    "This viewer is read-only: start it with `agentsm ui --allow-write` to approve, reject, "
    "modify, answer, stop or branch runs from the page."
)


class DecisionRequest(BaseModel):
    """A human's decision, as `agentsm approve|reject|modify RUN` takes it."""

    verdict: Literal["approved", "rejected", "modified"]
    call: str | None = Field(
        default=None, description="the waiting call: its id, a unique prefix, or #N (default: all)"
    )
    args: dict[str, Any] | None = Field(default=None, description="with `modified`: new arguments")
    note: str = ""


class AnswerRequest(BaseModel):
    """An answer to a question the run asked a person, as `agentsm answer RUN TEXT` takes it."""

    text: str
    call: str | None = Field(
        default=None, description="the question: its id, a unique prefix, or #N (default: first)"
    )


class StopRequest(BaseModel):
    """A stop, as `agentsm stop RUN` takes it."""

    reason: str = ""


class BranchRequest(BaseModel):
    """A branch, as `agentsm branch RUN --at SEQ` takes it: another answer for the next LLM
    call, or another result for the next tool call; `live` lets the viewer's agent's LLM
    answer every LLM call from the point, `live_tools` run its tools for calls the parent did
    not make there (both need `agentsm ui --builder`)."""

    at: int = Field(ge=1)
    answer: str | None = None
    tool_result: str | None = None
    live: bool = False
    live_tools: bool = False


def _writable(request: Request, viewer: Any) -> None:
    """Refuse a write unless allowed, and unless sent as JSON by a script or the page (a form
    on another site cannot send JSON without the browser asking this server first)."""
    if not viewer.allow_write:
        raise HTTPException(status_code=403, detail=READ_ONLY)
    if not request.headers.get("content-type", "").startswith("application/json"):
        raise HTTPException(status_code=415, detail="Send the request body as application/json.")


def _go_on(viewer: Any, run_id: str) -> bool:
    """With the user's agent (`--builder`), continue a decided run in the background as
    `agentsm resume` does; True when it was started."""
    if viewer.builder is None or run_id in viewer.running:
        return False

    def work() -> None:
        try:
            resume_run(viewer.db, run_id, viewer.builder)
        except AgentError:
            pass  # waiting again, or failed: the log says so and the page shows it
        finally:
            viewer.running.pop(run_id, None)

    thread = threading.Thread(target=work, name=f"resume-{run_id}", daemon=True)
    viewer.running[run_id] = thread
    thread.start()
    return True


@router.post("/runs/{run}/decision")
def decision(
    request: Request, viewer: ViewerDep, run: str, body: DecisionRequest
) -> dict[str, Any]:
    """Record a decision on the calls the run waits on (`replay.decide`, as the CLI does).
    When nothing is left waiting and the viewer has the user's agent, the run goes on here
    (as `agentsm resume`); otherwise a worker or `agentsm resume` continues it."""
    _writable(request, viewer)
    if body.verdict == "modified" and body.args is None:
        raise HTTPException(status_code=400, detail="modify needs the replacement arguments.")
    store = open_store(viewer.db)
    try:
        run_id = store.resolve(run)
        made = decide(
            store, run_id, body.verdict, args=body.args, call_id=body.call, note=body.note
        )
        left = pending_requests(store, run_id)
    finally:
        store.close()
    resumed = not left and _go_on(viewer, run_id)
    return {
        "run_id": run_id,
        "decided": [{"call_id": d.call_id, "verdict": d.verdict} for d in made],
        "still_waiting": [r.call.id for r in left],
        "resumed": resumed,
        "next": (
            "the run goes on here"
            if resumed
            else "still waiting"
            if left
            else f"recorded; continue with: agentsm resume {run_id} --builder ... "
            "(or a worker takes it)"
        ),
    }


@router.post("/runs/{run}/answer")
def answer_question(
    request: Request, viewer: ViewerDep, run: str, body: AnswerRequest
) -> dict[str, Any]:
    """Answer a question the run waits on (`replay.answer`, as the CLI does). When nothing is
    left waiting and the viewer has the user's agent, the run goes on here; otherwise a
    worker or `agentsm resume` continues it."""
    _writable(request, viewer)
    store = open_store(viewer.db)
    try:
        run_id = store.resolve(run)
        done = answer(store, run_id, body.text, call_id=body.call)
    finally:
        store.close()
    resumed = not done.waiting and _go_on(viewer, run_id)
    return {
        "run_id": run_id,
        "answered": done.request.reason,
        "still_waiting": [r.call.id for r in done.waiting],
        "resumed": resumed,
        "next": (
            "the run goes on here"
            if resumed
            else "still waiting"
            if done.waiting
            else f"recorded; continue with: agentsm resume {run_id} --builder ... "
            "(or a worker takes it)"
        ),
    }


@router.post("/runs/{run}/stop")
def stop(request: Request, viewer: ViewerDep, run: str, body: StopRequest) -> dict[str, Any]:
    """Stop the run (`replay.request_stop`, as `agentsm stop`): the process that drives it
    stops it at its next transition ("requested"), or, nobody driving it, it is stopped
    here ("stopped"). `agentsm resume` goes on from there."""
    _writable(request, viewer)
    store = open_store(viewer.db)
    try:
        run_id = store.resolve(run)
        how = request_stop(store, run_id, body.reason)
    finally:
        store.close()
    return {
        "run_id": run_id,
        "stop": how,
        "next": (
            "its driver stops it at its next transition"
            if how == "requested"
            else f"stopped; continue with: agentsm resume {run_id} --builder ..."
        ),
    }


@router.post("/runs/{run}/branch")
def branch(request: Request, viewer: ViewerDep, run: str, body: BranchRequest) -> dict[str, Any]:
    """Start a new run from fact `at` with the change (`replay.branch_run`, as `agentsm
    branch` does) and run it as far as it may go: the parent's recorded effects are reused
    where the request is the same; elsewhere it goes live where asked, or stops there. The
    answer is the branch's result (`BranchResult.to_dict`): status, where it started, each
    effect's source (`effects`), what it needs (`needs`) and `warnings`."""
    _writable(request, viewer)
    if body.answer is None and body.tool_result is None and not body.live:
        raise HTTPException(
            status_code=400, detail="Give the branch a change: an answer, a tool_result or live."
        )
    if (body.live or body.live_tools) and viewer.builder is None:
        raise HTTPException(
            status_code=400,
            detail="live and live_tools need the agent: start the viewer with --builder.",
        )
    response = LlmResponse.final_answer(body.answer) if body.answer is not None else None
    store = open_store(viewer.db)
    try:
        run_id = store.resolve(run)
        llm = agent_llm(store, run_id, viewer.builder) if body.live else None
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always", UnusedChange)  # they are in the result's notes
            result = branch_run(
                store,
                run_id,
                body.at,
                llm_response=response,
                tool_result=body.tool_result,
                llm=llm,
                builder=viewer.builder,
                live_tools=body.live_tools,
            )
    finally:
        store.close()
    said = result.to_dict("viewer")
    return {**said, "warnings": [*said["needs"], *said["notes"]]}
