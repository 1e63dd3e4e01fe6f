"""Effects served from a recording: the LLM, tool results and human decisions of a run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentsm import (
    AgentMemory,
    ApprovalRequest,
    LlmCaller,
    LlmDeadlineExceeded,
    LlmResponse,
    ToolCall,
    ToolOutcome,
    ToolRegistry,
)
from agentsm import facts as f
from agentsm.context import ToolRunner

__all__ = [
    "RecordedDecisions",
    "RecordedLlm",
    "RecordedLlmError",
    "RecordedTools",
    "ReplayedCrash",
]


class ReplayedCrash(BaseException):  # noqa: N818 - it is not an error: it stands for one
    """The recorded process died during this effect; replay stops the engine here too and then
    resumes the run, as the recorded run was resumed. A BaseException, so no handler takes it
    for a failure of the effect."""


class RecordedLlmError(Exception):
    """A recorded LLM failure raised again; its class name is the recorded error type."""


def _recorded_error(failure: f.LlmFailed) -> Exception:
    if failure.error_type == LlmDeadlineExceeded.__name__:  # the run stopped there: so will this
        return LlmDeadlineExceeded(failure.message)
    error_type: type[RecordedLlmError] = type(failure.error_type, (RecordedLlmError,), {})
    return error_type(failure.message)


class RecordedLlm:
    """An LLM that answers with a run's recorded outcomes, in order (a mock built from the
    recording). When they run out, `then` answers, or the call fails like a provider.
    `settings` are the request settings of the LLM it stands in for (recorded in RunStarted)."""

    def __init__(
        self,
        outcomes: Sequence[f.LlmResponded | f.LlmFailed | LlmResponse | None],
        then: LlmCaller | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._outcomes = list(outcomes)
        self._then = then
        self.settings = dict(settings or {})
        """The request settings the run records (those of the LLM it stands in for)."""
        self.served = 0

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        if self.served >= len(self._outcomes):
            if self._then is not None:
                return await self._then.call(memory, tools, model)
            raise RecordedLlmError(
                f"the recorded run made only {len(self._outcomes)} LLM calls; this replay asked "
                "for one more"
            )
        outcome = self._outcomes[self.served]
        self.served += 1
        if outcome is None:
            raise ReplayedCrash(f"the recorded process stopped during LLM call {self.served}")
        if isinstance(outcome, f.LlmFailed):
            raise _recorded_error(outcome)
        return outcome if isinstance(outcome, LlmResponse) else outcome.response

    def __repr__(self) -> str:
        return f"RecordedLlm(served={self.served}, recorded={len(self._outcomes)})"


class RecordedTools:
    """Tool results by call id from a recording; other calls go to `fallback` (the real tools)
    or come back as `ERROR: NotRecorded`. `first` overrides the first call run. A call the
    recorded process died in stops the replay there (`interrupted`, by call id)."""

    def __init__(
        self,
        outcomes: dict[str, ToolOutcome],
        fallback: ToolRunner | None = None,
        first: ToolOutcome | None = None,
        interrupted: dict[str, int] | None = None,
    ) -> None:
        self._outcomes = outcomes
        self._interrupted = dict(interrupted or {})
        self._fallback = fallback
        self._first = first

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        if self._interrupted.get(call.id):
            self._interrupted[call.id] -= 1
            raise ReplayedCrash(f"the recorded process stopped while {call.name} ran")
        if self._first is not None:
            first, self._first = self._first, None
            return first
        recorded = self._outcomes.get(call.id)
        if recorded is not None:
            return recorded
        if self._fallback is not None:
            return await self._fallback(call)
        return ToolOutcome.failed(
            "NotRecorded", f"the recording has no result for call {call.id} to '{call.name}'"
        )


class RecordedDecisions:
    """Human decisions by call id from a recording; other requests go to `fallback`, or stay
    waiting (None)."""

    def __init__(self, decisions: dict[str, f.Decision], fallback: object = None) -> None:
        self._decisions = decisions
        self._fallback = fallback

    def __call__(self, request: ApprovalRequest) -> object:
        decision = self._decisions.get(request.call.id)
        if decision is not None:
            return decision
        if callable(self._fallback):
            return self._fallback(request)
        return None
