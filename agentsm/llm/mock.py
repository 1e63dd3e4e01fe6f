"""MockLlmCaller: a scripted LLM that answers in order and fails like a provider when done."""

from __future__ import annotations

import inspect
import threading
from collections import deque
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
    It remembers the last `keep` calls it received (`calls`) and counts them all, so that a
    long run costs it the same per call at its end as at its start. `provider` names the
    provider the script stands in for (an OpenTelemetry `gen_ai.provider.name` such as
    "openai"); it is recorded in the run's definition, as a provider caller's is.
    """

    def __init__(
        self,
        responses: Iterable[ScriptItem] = (),
        *,
        keep: int = 1000,
        provider: str | None = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"MockLlmCaller(keep={keep}): keep at least the last call (1).")
        if provider is not None and not (isinstance(provider, str) and provider.strip()):
            raise ValueError(
                f"MockLlmCaller(provider={provider!r}): name the provider the script stands "
                'in for, e.g. provider="openai", or leave it out.'
            )
        self.provider = provider
        self._script: deque[ScriptItem] = deque(responses)
        self._calls: deque[MockCall] = deque(maxlen=keep)
        self._count = 0
        self._lock = threading.Lock()

    @property
    def settings(self) -> dict[str, Any]:
        """The provider the script stands in for, if it was given (see `LlmCaller`)."""
        return {"provider": self.provider} if self.provider else {}

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        with self._lock:
            self._calls.append(MockCall(model, memory.task, memory, tuple(tools.names())))
            self._count += 1
            if not self._script:
                raise LlmScriptExhausted(
                    f"MockLlmCaller: no more programmed responses (call {self._count})"
                )
            item = self._script.popleft()
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
        return self._count

    def model_for_call(self, n: int) -> str | None:
        """The model passed to the n-th call (0-indexed), or None (no such call, or one older
        than the last `keep`)."""
        first = self._count - len(self._calls)
        return self._calls[n - first].model if first <= n < self._count else None

    @property
    def calls(self) -> list[MockCall]:
        """The calls received (the last `keep` of them), oldest first."""
        return list(self._calls)

    def remaining(self) -> int:
        """Responses not yet served."""
        return len(self._script)

    def __repr__(self) -> str:
        shown = f", provider={self.provider!r}" if self.provider else ""
        return f"MockLlmCaller(served={self._count}, remaining={len(self._script)}{shown})"
