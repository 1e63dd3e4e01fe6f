"""The JSON bodies of the conversation API: what a client sends (checked here: a bad body is
a 422 before anything is recorded) and what it gets back."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from agentsm.images import Image

__all__ = [
    "AnswerBody",
    "DecisionBody",
    "MessageBody",
    "NewThread",
    "PendingRequest",
    "Problem",
    "SteerBody",
    "Steered",
    "StopBody",
    "Stopped",
    "ThreadDetail",
    "ThreadInfo",
    "ThreadMessage",
    "TurnInfo",
]

THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("give some text, not only spaces")
    return value


class NewThread(BaseModel):
    """A thread to start: nothing is recorded until its first message."""

    thread_id: str | None = Field(
        default=None,
        description="its id (letters, digits, `.`, `_`, `-`; at most 64); default: a new one",
        pattern=THREAD_ID.pattern,
    )


class MessageBody(BaseModel):
    """A user message: the next turn's task."""

    text: str = Field(min_length=1, description="the message")
    images: list[str] = Field(
        default_factory=list,
        description="images sent with it: each an http(s) URL or a data: URL (base64)",
    )

    _check_text = field_validator("text")(_text)

    @field_validator("images")
    @classmethod
    def _urls(cls, images: list[str]) -> list[str]:
        for url in images:
            if not url.startswith(("http://", "https://", "data:")):
                raise ValueError(f"an image is an http(s) or data: URL, not {url[:40]!r}")
            Image.from_url(url)  # a data: URL that is not base64 is refused here
        return images

    def image_list(self) -> list[Image]:
        """The images, as the thread takes them."""
        return [Image.from_url(url) for url in self.images]


class AnswerBody(BaseModel):
    """An answer to the question the thread's turn waits on (as `agentsm answer` takes it)."""

    text: str = Field(description="the answer")
    call: str | None = Field(
        default=None,
        description="the question: its call id, a unique prefix, or #N (default: the first)",
    )


class DecisionBody(BaseModel):
    """A decision on the calls the thread's turn waits on (as `agentsm approve`, `reject` and
    `modify` take it)."""

    verdict: Literal["approved", "rejected", "modified"]
    call: str | None = Field(
        default=None,
        description="the call: its id, a unique prefix, or #N (default: every waiting call)",
    )
    args: dict[str, Any] | None = Field(
        default=None, description="with `modified`: the call's new arguments (all of them)"
    )
    note: str = Field(default="", description="why, recorded with the decision")


class SteerBody(BaseModel):
    """A message to the turn under way: its LLM reads it before its next call."""

    text: str = Field(min_length=1)

    _check_text = field_validator("text")(_text)


class StopBody(BaseModel):
    """A request to stop the turn under way."""

    reason: str = Field(default="", description="why, recorded with the stop")


class TurnInfo(BaseModel):
    """One turn of a thread: its run, as the catalog shows it."""

    run_id: str
    turn: int
    status: str = Field(
        description="done, failed, aborted, waiting, ready, stopped, running, interrupted..."
    )
    task: str = Field(description="the turn's message")
    answer: str | None = Field(description="the start of its answer (200 characters)")
    error: str | None = Field(description="the start of its error")
    steps: int
    input_tokens: int
    output_tokens: int
    created_at: float
    updated_at: float


class ThreadMessage(BaseModel):
    """A message of the conversation: a turn's user message, or its answer (`content` null
    and `error` set for a turn that failed)."""

    role: Literal["user", "assistant"]
    content: str | None
    turn: int
    run_id: str
    error: str | None = None
    images: list[dict[str, Any]] | None = None


class PendingRequest(BaseModel):
    """What the thread's last turn waits for: a decision (`approval`) or an answer
    (`question`)."""

    kind: Literal["approval", "question"]
    call_id: str
    name: str
    args: dict[str, Any]
    reason: str = Field(description="why it waits; for a question, the question")


class ThreadInfo(BaseModel):
    """A thread as the catalog shows it."""

    thread_id: str
    turns: int
    status: str | None = Field(description="its last turn's status (null: no turn yet)")
    last_run: str | None
    last_message: str | None
    last_answer: str | None
    last_error: str | None
    updated_at: float | None
    branched_from: str | None = None
    branch_turn: int | None = None
    driving: bool = Field(description="a turn of it is under way in this server")


class ThreadDetail(ThreadInfo):
    """A thread: its turns in order, the conversation, and what its last turn waits for."""

    runs: list[TurnInfo]
    messages: list[ThreadMessage]
    pending: list[PendingRequest]


class Steered(BaseModel):
    """A steering message sent: its number among the run's messages."""

    thread_id: str
    run_id: str
    message: int
    status: str = Field(description="the run's status when it was sent")


class Stopped(BaseModel):
    """A stop: `requested` (its driver stops it at its next transition; the turn's stream
    ends with `stopped`) or `stopped` (nobody drove it: stopped at once)."""

    thread_id: str
    run_id: str
    stop: Literal["requested", "stopped"]


class Problem(BaseModel):
    """What was wrong, and what to do, in a sentence."""

    detail: str
