"""What `engine.stream()` yields while a run goes on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .types import ApprovalRequest, ToolCall

__all__ = [
    "AgentOutput",
    "ApprovalNeeded",
    "FinalAnswer",
    "ReasoningDelta",
    "RunErrored",
    "SteerTaken",
    "StopTaken",
    "TextDelta",
    "TextRetracted",
    "ToolFinished",
    "ToolPartial",
    "ToolProgress",
    "ToolStarted",
    "TransitionTaken",
]


@dataclass(frozen=True)
class TransitionTaken:
    """The engine moved from one state to another."""

    from_state: str
    event: str
    to_state: str
    step: int


@dataclass(frozen=True)
class ToolStarted:
    """A tool is about to run."""

    call: ToolCall


@dataclass(frozen=True)
class ToolFinished:
    """A tool has run; `observation` is what the LLM will read."""

    call: ToolCall
    observation: str
    success: bool


@dataclass(frozen=True)
class ToolProgress:
    """A running tool said how it is going (`ctx.progress(text)`); not recorded, and not what
    the LLM reads: its result is, in the `ToolFinished` that follows."""

    call: ToolCall
    text: str

    def __repr__(self) -> str:
        return f"ToolProgress({self.call.name!r}, {_cut(self.text)!r})"


@dataclass(frozen=True)
class ToolPartial:
    """A running tool handed over part of its result (`ctx.partial(value)`), as it gave it;
    not recorded: the LLM reads the result the tool returns."""

    call: ToolCall
    value: Any

    def __repr__(self) -> str:
        return f"ToolPartial({self.call.name!r}, {_cut(repr(self.value))})"


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class TextDelta:
    """A fragment of LLM text, as a streaming provider delivers it."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A fragment of the model's reasoning, as a streaming provider delivers it: `kind` is
    "thinking" or "summary" (see `ReasoningPart`). It is not part of the answer."""

    text: str
    kind: str = "thinking"


@dataclass(frozen=True)
class TextRetracted:
    """The text streamed since the LLM call began (`text`, and `reasoning` of the reasoning
    deltas) is void: the attempt failed (a cut connection, an overload) and the call is retried
    or fails. Discard it; a retry streams the answer again from its start."""

    text: str
    reason: str
    reasoning: str = ""


@dataclass(frozen=True)
class SteerTaken:
    """A message a person sent the run (`engine.steer`, `replay.steer`) was taken and
    recorded: the LLM reads it from its next call on."""

    text: str


@dataclass(frozen=True)
class StopTaken:
    """The run stopped at a stop request (status stopped, resumable)."""

    reason: str


@dataclass(frozen=True)
class FinalAnswer:
    """The run ended in Done with this answer."""

    content: str


@dataclass(frozen=True)
class RunErrored:
    """The run ended in Error for this reason."""

    error: str


@dataclass(frozen=True)
class ApprovalNeeded:
    """The run stopped in WaitingForHuman: these calls wait for a decision."""

    requests: tuple[ApprovalRequest, ...]


AgentOutput = (
    TransitionTaken
    | ToolStarted
    | ToolFinished
    | ToolProgress
    | ToolPartial
    | TextDelta
    | ReasoningDelta
    | TextRetracted
    | FinalAnswer
    | RunErrored
    | ApprovalNeeded
    | SteerTaken
    | StopTaken
)
