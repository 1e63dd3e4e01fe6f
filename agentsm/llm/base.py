"""The LlmCaller protocol: the single seam between the state machine and any LLM provider."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..outputs import AgentOutput, ReasoningDelta, TextDelta, TextRetracted

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry
    from ..types import LlmResponse

__all__ = ["LlmCaller", "emit_reasoning", "emit_text", "llm_settings"]


@runtime_checkable
class LlmCaller(Protocol):
    """Anything with this one method can drive an agent.

    Build the request from `memory.build_messages()` and `tools.schemas()`; an empty `model`
    means "your own default". Return an `LlmResponse`; raise to report a failure (the run then
    ends through FatalError, with the exception's type and message in the log).

    A caller may also have a `settings` attribute: a JSON object of what it asks of the server
    besides the conversation (temperature, seed, ...), recorded in the run's definition.
    """

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        """One LLM call."""
        ...


def llm_settings(llm: object) -> dict[str, Any]:
    """The request settings a caller declares (its `settings` attribute), or {}."""
    return dict(getattr(llm, "settings", None) or {})


_text_sink: contextvars.ContextVar[Callable[[AgentOutput], None] | None] = contextvars.ContextVar(
    "agentsm_text_sink", default=None
)


def emit_text(delta: str) -> None:
    """Pass a streamed text fragment to `engine.stream()` as it arrives (no-op elsewhere)."""
    sink = _text_sink.get()
    if sink is not None and delta:
        sink(TextDelta(delta))


def emit_reasoning(delta: str, kind: str = "thinking") -> None:
    """Pass a streamed fragment of the model's reasoning to `engine.stream()` as it arrives
    (no-op elsewhere)."""
    sink = _text_sink.get()
    if sink is not None and delta:
        sink(ReasoningDelta(delta, kind))


def retract_text(text: str, reason: str, reasoning: str = "") -> None:
    """Tell `engine.stream()` that `text` (and `reasoning`), streamed by an attempt that then
    failed, is void."""
    sink = _text_sink.get()
    if sink is not None and (text or reasoning):
        sink(TextRetracted(text, reason, reasoning))
