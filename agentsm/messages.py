"""What the LLM is sent of a run's history: each entry as provider-neutral messages, the
tool calls of one step as one assistant turn (see `AgentMemory.build_messages`)."""

from __future__ import annotations

from typing import Any

from .frozen import thaw
from .images import Image
from .types import HistoryEntry

__all__ = ["add_entry", "earlier", "flush_turn", "image_part", "with_images"]


def add_entry(
    entry: HistoryEntry, turn: list[HistoryEntry], messages: list[dict[str, Any]]
) -> None:
    """One history entry into the messages: a summary as readable context, a message a person
    sent the run as a user message, a tool call into the assistant turn of its step (the turn
    of an earlier step sent first)."""
    said = entry.said
    if said is not None:
        flush_turn(turn, messages)
        messages.append(with_images({"role": said, "content": earlier(entry)}, entry))
        return
    if entry.is_summary:
        flush_turn(turn, messages)
        messages.append(
            {"role": "user", "content": f"Summary of the work so far: {entry.observation}"}
        )
        return
    if turn and turn[0].step != entry.step:
        flush_turn(turn, messages)
    turn.append(entry)


def earlier(entry: HistoryEntry) -> str:
    """What an earlier message or answer of the thread says to the LLM."""
    if not entry.success:
        return f"(No answer: this turn failed. {entry.observation})"
    return entry.observation or ("(empty answer)" if entry.said == "assistant" else "(empty)")


def flush_turn(turn: list[HistoryEntry], messages: list[dict[str, Any]]) -> None:
    """The step's entries gathered in `turn` into the messages, as one assistant turn with its
    calls and a tool message for each result; `turn` is emptied."""
    if not turn:
        return
    said: dict[str, Any] = {
        "role": "assistant",
        "content": turn[0].text,
        "tool_calls": [
            {"id": e.tool.id, "name": e.tool.name, "arguments": thaw(e.tool.args)} for e in turn
        ],
    }
    if turn[0].reasoning:
        said["reasoning"] = [part.model_dump(mode="json") for part in turn[0].reasoning]
    messages.append(said)
    for e in turn:
        messages.append(
            with_images(
                {
                    "role": "tool",
                    "tool_call_id": e.tool.id,
                    "name": e.tool.name,
                    "content": e.observation,
                    "is_error": not e.success,
                },
                e,
            )
        )
    turn.clear()


def with_images(message: dict[str, Any], entry: HistoryEntry) -> dict[str, Any]:
    """The message with the entry's images under `images`, if it has any."""
    if entry.images:
        message["images"] = [image_part(i) for i in entry.images]
    return message


def image_part(image: Image) -> dict[str, Any]:
    """An image as `build_messages()` gives it: its media type and URL, or its media type,
    digest and (where found) bytes."""
    if image.url is not None:
        return {"media_type": image.media_type, "url": image.url}
    part: dict[str, Any] = {"media_type": image.media_type, "digest": image.digest}
    if image.data is not None:
        part["data"] = image.data
    return part
