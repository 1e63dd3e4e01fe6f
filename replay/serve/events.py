"""The server-sent events of a turn: what `engine.stream()` yields as it runs, each as a named
event with a JSON payload (one pydantic model per event name, in the OpenAPI document), and
their wire form (`id`, `event` and `data` lines)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field
from pydantic_core import to_jsonable_python

from agentsm.outputs import (
    AgentOutput,
    ApprovalNeeded,
    FinalAnswer,
    ReasoningDelta,
    RunErrored,
    SteerTaken,
    StopTaken,
    TextDelta,
    TextRetracted,
    ToolFinished,
    ToolPartial,
    ToolProgress,
    ToolStarted,
    TransitionTaken,
)
from agentsm.types import ApprovalRequest

__all__ = [
    "EVENTS",
    "AnswerEvent",
    "ApprovalEvent",
    "EndEvent",
    "ErrorEvent",
    "Event",
    "QuestionEvent",
    "ReasoningEvent",
    "RetractedEvent",
    "RunEvent",
    "SteeredEvent",
    "StoppedEvent",
    "TextEvent",
    "ToolCallEvent",
    "ToolPartialEvent",
    "ToolProgressEvent",
    "ToolResultEvent",
    "TransitionEvent",
    "encode",
    "events_of",
    "item_schema",
    "request_events",
    "stream_description",
]


class RunEvent(BaseModel):
    """First of every stream: the turn it follows (its thread, run id and number)."""

    thread_id: str
    run_id: str
    turn: int = Field(description="the turn's number in its thread, from 1")


class TextEvent(BaseModel):
    """A fragment of the LLM's text, as the provider streams it (a caller that does not
    stream sends none: the answer comes whole in `answer`)."""

    text: str


class ReasoningEvent(BaseModel):
    """A fragment of the model's reasoning (not part of the answer)."""

    text: str
    kind: str = Field(description='"thinking" or "summary"')


class RetractedEvent(BaseModel):
    """The text and reasoning streamed since the LLM call began are void (the attempt failed
    and is retried, or the call fails): discard them."""

    text: str
    reason: str
    reasoning: str = ""


class TransitionEvent(BaseModel):
    """The run moved from one state of its machine to another."""

    from_state: str
    event: str
    to_state: str
    step: int


class ToolCallEvent(BaseModel):
    """A tool is about to run with these arguments."""

    call_id: str
    name: str
    args: dict[str, Any]


class ToolProgressEvent(BaseModel):
    """A running tool said how it is going (`ctx.progress`); not what the LLM reads."""

    call_id: str
    name: str
    text: str


class ToolPartialEvent(BaseModel):
    """A running tool handed over part of its result (`ctx.partial`), as JSON (what JSON
    cannot hold, as its repr); the LLM reads the whole result in `tool_result`."""

    call_id: str
    name: str
    value: Any


class ToolResultEvent(BaseModel):
    """A tool has run: `observation` is what the LLM reads of it."""

    call_id: str
    name: str
    observation: str
    success: bool


class SteeredEvent(BaseModel):
    """A message steering the run (`POST /threads/{thread_id}/steer`) was taken and
    recorded: the LLM reads it from its next call on."""

    text: str


class ApprovalEvent(BaseModel):
    """The run waits for a person's decision on this call
    (`POST /threads/{thread_id}/decision`); one event per call, then `end` (waiting)."""

    call_id: str
    name: str
    args: dict[str, Any]
    reason: str
    index: int = Field(description="the call's place among its step's calls")


class QuestionEvent(BaseModel):
    """The run asked a person this question (its `ask_human` tool, or a handler's
    `ctx.ask`) and waits for the answer (`POST /threads/{thread_id}/answer`); then `end`."""

    call_id: str
    question: str


class StoppedEvent(BaseModel):
    """The run stopped where someone asked it to (`POST /threads/{thread_id}/stop`); it goes
    on with `POST /threads/{thread_id}/resume`."""

    reason: str


class AnswerEvent(BaseModel):
    """The turn's final answer: the run ended in Done."""

    content: str


class ErrorEvent(BaseModel):
    """The run ended in Error (the next turn's LLM is told why), or the engine stopped it
    (aborted), or the store failed: what happened, in a sentence."""

    error: str


class EndEvent(BaseModel):
    """Last of every stream: how the run stands now. `status` is the catalog's: done,
    failed, aborted, waiting (answer or decide), stopped (resume), running (driven elsewhere)."""

    thread_id: str
    run_id: str
    status: str
    answer: str | None = None
    error: str | None = None


EVENTS: dict[str, type[BaseModel]] = {
    "run": RunEvent,
    "transition": TransitionEvent,
    "text": TextEvent,
    "reasoning": ReasoningEvent,
    "retracted": RetractedEvent,
    "tool_call": ToolCallEvent,
    "tool_progress": ToolProgressEvent,
    "tool_partial": ToolPartialEvent,
    "tool_result": ToolResultEvent,
    "steered": SteeredEvent,
    "approval": ApprovalEvent,
    "question": QuestionEvent,
    "stopped": StoppedEvent,
    "answer": AnswerEvent,
    "error": ErrorEvent,
    "end": EndEvent,
}
"""Every event a stream may send, by name, with the model of its payload, in the order they
usually come."""

Event = tuple[str, BaseModel]
"""One event: its name (a key of `EVENTS`) and its payload."""


def request_events(requests: Sequence[ApprovalRequest]) -> list[Event]:
    """What a waiting run waits for: a `question` or an `approval` event per request."""
    said: list[Event] = []
    for r in requests:
        if r.kind == "question":
            said.append(("question", QuestionEvent(call_id=r.call.id, question=r.reason)))
        else:
            approval = ApprovalEvent(
                call_id=r.call.id,
                name=r.call.name,
                args=dict(r.call.args),
                reason=r.reason,
                index=r.index,
            )
            said.append(("approval", approval))
    return said


def events_of(output: AgentOutput) -> list[Event]:
    """The events one output of `engine.stream()` is sent as."""
    match output:
        case TextDelta(text=text):
            return [("text", TextEvent(text=text))]
        case ReasoningDelta(text=text, kind=kind):
            return [("reasoning", ReasoningEvent(text=text, kind=kind))]
        case TextRetracted(text=text, reason=reason, reasoning=reasoning):
            return [("retracted", RetractedEvent(text=text, reason=reason, reasoning=reasoning))]
        case TransitionTaken(from_state=a, event=event, to_state=b, step=step):
            return [
                ("transition", TransitionEvent(from_state=a, event=event, to_state=b, step=step))
            ]
        case ToolStarted(call=call):
            return [
                ("tool_call", ToolCallEvent(call_id=call.id, name=call.name, args=dict(call.args)))
            ]
        case ToolProgress(call=call, text=text):
            return [
                ("tool_progress", ToolProgressEvent(call_id=call.id, name=call.name, text=text))
            ]
        case ToolPartial(call=call, value=value):
            part = to_jsonable_python(value, fallback=repr)
            return [("tool_partial", ToolPartialEvent(call_id=call.id, name=call.name, value=part))]
        case ToolFinished(call=call, observation=observation, success=success):
            result = ToolResultEvent(
                call_id=call.id, name=call.name, observation=observation, success=success
            )
            return [("tool_result", result)]
        case SteerTaken(text=text):
            return [("steered", SteeredEvent(text=text))]
        case ApprovalNeeded(requests=requests):
            return request_events(requests)
        case StopTaken(reason=reason):
            return [("stopped", StoppedEvent(reason=reason))]
        case FinalAnswer(content=content):
            return [("answer", AnswerEvent(content=content))]
        case RunErrored(error=error):
            return [("error", ErrorEvent(error=error))]
    return []  # an output of a later release: not sent until it has an event of its own


def encode(n: int, event: Event) -> str:
    """One event on the wire: its number in the stream (`id`), its name and its JSON."""
    name, payload = event
    return f"id: {n}\nevent: {name}\ndata: {payload.model_dump_json()}\n\n"


def stream_description() -> str:
    """The events of a stream, as the OpenAPI document describes them (a table)."""
    rows = [
        f"| `{name}` | `{model.__name__}` | {' '.join((model.__doc__ or '').split())} |"
        for name, model in EVENTS.items()
    ]
    return "\n".join(
        [
            "A `text/event-stream`: each event has an `id` (its number in the stream, from 1), "
            "an `event` name and JSON `data`. It starts with `run` and ends with `end`.",
            "",
            "| event | data | when |",
            "| --- | --- | --- |",
            *rows,
        ]
    )


def item_schema() -> dict[str, Any]:
    """The OpenAPI schema of one event of a stream (OpenAPI 3.2's `itemSchema`): one of the
    named events, whose `data` is JSON of its model (in the document's components)."""
    return {
        "oneOf": [
            {
                "type": "object",
                "title": name,
                "properties": {
                    "id": {"type": "string"},
                    "event": {"const": name},
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": {"$ref": f"#/components/schemas/{model.__name__}"},
                    },
                },
                "required": ["event", "data"],
            }
            for name, model in EVENTS.items()
        ]
    }
