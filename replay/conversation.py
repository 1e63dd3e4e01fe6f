"""The exact conversation an LLM was sent at a point of a run, rebuilt from the log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentsm import facts as f
from eventstore import EventStore

from .recording import Recording
from .timetravel import memory_at

__all__ = ["Conversation", "conversation_at"]


@dataclass(frozen=True)
class Conversation:
    """The messages memory gives the LLM at `seq`; `request_seq` is the LLM request that was
    sent exactly these (its digest matches), None when no request was made from there."""

    run_id: str
    seq: int
    messages: list[dict[str, Any]]
    request_seq: int | None

    @property
    def note(self) -> str:
        """Where the messages come from, in words."""
        if self.request_seq is not None:
            return f"as sent by the LLM request at seq {self.request_seq}"
        return "what the next LLM request would be sent (no request was made from here)"

    def __repr__(self) -> str:
        return (
            f"Conversation(run_id={self.run_id!r}, seq={self.seq}, "
            f"messages={len(self.messages)}, request_seq={self.request_seq})"
        )


def conversation_at(store: EventStore, run_id: str, seq: int) -> Conversation:
    """The conversation of run `run_id` right after fact `seq` (what `agentsm memory --at SEQ
    --messages` prints), with the LLM request at or before `seq` that sent it, if any."""
    recording = Recording.load(store, run_id, upto=seq)
    mem, _ = memory_at(store, recording.run_id, seq)
    sent = mem.build_messages()
    asked = [e for e in recording.entries if isinstance(e.fact, f.LlmRequested)]
    last = asked[-1] if asked else None
    matches = last is not None and last.fact.messages_digest == mem.messages_digest()  # type: ignore[union-attr]
    return Conversation(
        recording.run_id, seq, sent, last.seq if matches and last is not None else None
    )
