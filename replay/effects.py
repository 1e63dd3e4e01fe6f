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
from agentsm.context import ApprovalCallback, ToolRunner, live_value
from agentsm.frozen import same_json

from .recording import DecisionEffect, ToolEffect

__all__ = [
    "RecordedDecisions",
    "RecordedLlm",
    "RecordedLlmError",
    "RecordedMessages",
    "RecordedTools",
    "RecordedValues",
    "ReplayDiverged",
    "ReplayedCrash",
]


class ReplayedCrash(BaseException):  # noqa: N818 - it is not an error: it stands for one
    """The recorded process died during this effect; replay stops the engine here too and then
    resumes the run, as the recorded run was resumed. A BaseException, so no handler takes it
    for a failure of the effect."""


class ReplayDiverged(BaseException):  # noqa: N818 - it stops the replay, it is not a failure
    """The replayed run asked for an effect that is not the one recorded at its place (another
    tool, other arguments, another call to decide): the replay stops there and reports the
    first fact that differs. A BaseException, so no handler takes it for a failed effect."""


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


def _same_call(a: ToolCall, b: ToolCall) -> bool:
    """The identity a recorded effect is checked by: the tool and its arguments, as JSON (1 is
    not true; ids are the LLM's labels and may repeat)."""
    return a.name == b.name and same_json(a.args, b.args)


class RecordedTools:
    """Tool results served by position: the n-th tool run gets the n-th recorded run's outcome
    when the call is the same tool with the same arguments. `strict` (replay): a different call
    is a divergence and stops the engine; a run the recorded process died in stops it too.
    Otherwise (a branch) a different call, or one past the recording, goes to `fallback`.
    `execute`: recorded positions run `fallback` (the real tools) instead of being served, except
    results a branch set and runs that never reported. `first` answers the first call."""

    def __init__(
        self,
        effects: Sequence[ToolEffect],
        fallback: ToolRunner | None = None,
        *,
        strict: bool = False,
        execute: bool = False,
        first: ToolOutcome | None = None,
    ) -> None:
        self._effects = list(effects)
        self._fallback = fallback
        self._strict = strict
        self._execute = execute
        self._first = first
        self.served = 0

    async def __call__(self, call: ToolCall) -> ToolOutcome:
        position = self.served
        self.served += 1
        recorded = self._effects[position] if position < len(self._effects) else None
        if self._first is not None:
            first, self._first = self._first, None
            return first
        if recorded is not None and not _same_call(recorded.call, call):
            if self._strict:
                raise ReplayDiverged(
                    f"tool run {position + 1} calls {call.name}({call.args}); the recording "
                    f"ran {recorded.call.name}({recorded.call.args}) there"
                )
            recorded = None
        if recorded is not None and recorded.outcome is None:
            raise ReplayedCrash(f"the recorded process stopped while {call.name} ran")
        if recorded is not None and recorded.outcome is not None:
            outcome = recorded.outcome
            if not self._execute or recorded.pinned or not outcome.known or not self._fallback:
                return outcome  # never re-run: a result a branch set, or one never reported
        if self._fallback is not None:
            return await self._fallback(call)
        return ToolOutcome.failed(
            "NotRecorded", f"the recording has no result for tool run {position + 1} ({call.name})"
        )

    def __repr__(self) -> str:
        return f"RecordedTools(served={self.served}, recorded={len(self._effects)})"


class RecordedDecisions:
    """Human decisions served as they were recorded: one group per HumanDecided fact, in order.

    The WaitingForHuman handler asks about each waiting call once per pass, in the LLM's order;
    each pass is answered from the next group, by position: the call at a position the group
    decided gets that decision when it is the same call (tool, arguments), and a call the group
    did not decide gets None, so the run waits there as the recorded run did and the next group
    answers when it goes on (`paused` says that happened). So calls decided in any order (the
    second, then the rest) replay as recorded. A different call at a decided position is a
    divergence (`strict`) or goes to `fallback` (a branch), as do questions past the recording.
    The questions handlers asked (`ctx.ask`, index -1) get the recorded `answers` in order; an
    answer marked as given after the run was stopped while it waited is withheld once, so that
    the replay waits there too."""

    def __init__(
        self,
        groups: Sequence[Sequence[DecisionEffect]],
        fallback: ApprovalCallback | None = None,
        *,
        strict: bool = False,
        answers: Sequence[tuple[str, bool]] = (),
    ) -> None:
        self._groups = [list(g) for g in groups if g]
        self._fallback = fallback
        self._strict = strict
        self._group = -1
        self._last: tuple[int, int] | None = None  # (step, position) of the last question
        self._answers = list(answers)
        self._answered = 0
        self._waited = -1  # the answer the run waited for once already (see `answers`)
        self.paused = False

    def __call__(self, request: ApprovalRequest) -> Any:
        if request.kind == "question" and request.index == -1:  # a handler's own question
            if self._answered < len(self._answers):
                given, waited = self._answers[self._answered]
                if waited and self._waited < self._answered:  # stopped while it waited
                    self._waited = self._answered
                    self.paused = True
                    return None
                self._answered += 1
                return given
            return self._fallback(request) if self._fallback is not None else None
        last, self._last = self._last, (request.step, request.index)
        if last is None or last[0] != request.step or request.index <= last[1]:
            self._group += 1  # a new pass of the handler: the next recorded group answers it
        if self._group >= len(self._groups):
            return self._fallback(request) if self._fallback is not None else None
        recorded = next((d for d in self._groups[self._group] if d.index == request.index), None)
        if recorded is None:  # the recorded run left this call waiting here
            if self._strict:
                self.paused = True
                return None
            return self._fallback(request) if self._fallback is not None else None
        if recorded.call is None or not _same_call(recorded.call, request.call):
            if self._strict:
                raise ReplayDiverged(
                    f"a decision is asked for {request.call.name}({request.call.args}) at "
                    f"position {request.index}; the recorded decision there was on another call"
                )
            return self._fallback(request) if self._fallback is not None else None
        return recorded.decision

    def __repr__(self) -> str:
        return f"RecordedDecisions(group={self._group}, groups={len(self._groups)})"


class RecordedMessages:
    """What the run heard from outside (steering messages, stop requests), served where it
    was recorded: the engine looks between two transitions, the log at seq `last`, and gets
    the facts recorded right after that seq. Nothing is taken from the store's inbox."""

    def __init__(self, heard: Sequence[tuple[int, f.Steered | f.StopRequested]]) -> None:
        self._at = dict(heard)

    def due(self, last: int) -> tuple[list[f.Steered | f.StopRequested], int]:
        found: list[f.Steered | f.StopRequested] = []
        while (fact := self._at.get(last + 1 + len(found))) is not None:
            found.append(fact)
        return found, 0

    def __repr__(self) -> str:
        return f"RecordedMessages({len(self._at)} recorded)"


class RecordedValues:
    """The values handlers drew, served by position: the n-th `ctx.now()`, `uuid()` or
    `random()` gets the n-th recorded value when it was drawn from the same source. A draw of
    another source is a divergence (`strict`) or drawn live (a branch), as are draws past the
    recording."""

    def __init__(self, draws: Sequence[f.ValueDrawn], *, strict: bool = False) -> None:
        self._draws = list(draws)
        self._strict = strict
        self.served = 0

    def __call__(self, source: f.DrawSource) -> float | str:
        position = self.served
        self.served += 1
        if position < len(self._draws):
            recorded = self._draws[position]
            if recorded.source == source:
                return recorded.value
            if self._strict:
                raise ReplayDiverged(
                    f"value {position + 1} is drawn from {source}; the recording drew it from "
                    f"{recorded.source}"
                )
        return live_value(source)

    def __repr__(self) -> str:
        return f"RecordedValues(served={self.served}, recorded={len(self._draws)})"
