"""MockLlmCaller: a scripted LLM that answers in order and fails like a provider when done."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..types import LlmResponse

if TYPE_CHECKING:
    from ..memory import AgentMemory
    from ..tools import ToolRegistry

__all__ = ["LlmScriptExhausted", "MockCall", "MockLlmCaller"]

ScriptItem = LlmResponse | BaseException | Callable[..., Any]


class LlmScriptExhausted(RuntimeError):
    """The mock was called more times than it has responses."""


@dataclass(frozen=True)
class MockCall:
    """One call the mock received: the model, the task, and the memory it was shown."""

    model: str
    task: str
    memory: AgentMemory
    tool_names: tuple[str, ...]


class MockLlmCaller:
    """Returns pre-programmed responses in sequence.

    A script item is an `LlmResponse`, an exception (raised, as a provider error would be), or a
    function `(memory, tools, model) -> LlmResponse` for answers that depend on the request.
    """

    def __init__(self, responses: Iterable[ScriptItem] = ()) -> None:
        self._script: list[ScriptItem] = list(responses)
        self._calls: list[MockCall] = []
        self._lock = threading.Lock()

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        with self._lock:
            self._calls.append(MockCall(model, memory.task, memory, tuple(tools.names())))
            if not self._script:
                raise LlmScriptExhausted(
                    f"MockLlmCaller: no more programmed responses (call {len(self._calls)})"
                )
            item = self._script.pop(0)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, LlmResponse):
            return item
        result = item(memory, tools, model)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, LlmResponse):
            raise TypeError(f"MockLlmCaller script function returned {result!r}, not LlmResponse")
        return result

    def push(self, *responses: ScriptItem) -> None:
        """Append responses to the script."""
        with self._lock:
            self._script.extend(responses)

    def call_count(self) -> int:
        """How many times `call` was invoked."""
        return len(self._calls)

    def model_for_call(self, n: int) -> str | None:
        """The model passed to the n-th call (0-indexed), or None."""
        return self._calls[n].model if 0 <= n < len(self._calls) else None

    @property
    def calls(self) -> list[MockCall]:
        """Every call received, in order."""
        return list(self._calls)

    def remaining(self) -> int:
        """Responses not yet served."""
        return len(self._script)

    def __repr__(self) -> str:
        return f"MockLlmCaller(served={len(self._calls)}, remaining={len(self._script)})"
