"""Errors of agentsm. Failure that the LLM can reason about is data, never one of these.

AgentError                   root of everything agentsm raises
├── BuildError               setup: the builder or a table was given something unusable
│   └── McpServerUnavailable an MCP server could not be started or reached
├── AgentFailed              the run ended in Error; `.error` holds the recorded reason
├── HumanInputRequired       the run waits for a human decision and has no callback
├── RunStopped               the run stopped where someone asked it to (resumable)
├── EngineBusy               an engine was asked to drive its run while it already does
├── ThreadBusy               a thread cannot take a message: its last turn has not ended
├── UnreadableFact           a stored fact cannot be decoded (damaged, or an unknown kind)
│   └── FactVersionTooNew    a stored fact is of a newer version than this code reads
└── EngineError              the run stops where it is (recorded, resumable)
    ├── LlmDeadlineExceeded  an LLM call did not answer within its deadline
    ├── InvalidTransition    a handler returned an event the table has no row for
    ├── NoHandlerForState    the current state has no handler
    ├── SafetyCapExceeded    more transitions than the safety cap allows
    ├── OwnershipViolation   a handler recorded a fact its state does not own
    ├── HandlerCrashed       a handler raised instead of returning an event
    └── UnrecordableFact     a fact would not read back as written: nothing was recorded
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .types import ApprovalRequest

__all__ = [
    "AgentError",
    "AgentFailed",
    "BuildError",
    "EngineBusy",
    "EngineError",
    "FactVersionTooNew",
    "HandlerCrashed",
    "HumanInputRequired",
    "InvalidTransition",
    "LlmDeadlineExceeded",
    "McpServerUnavailable",
    "NoHandlerForState",
    "OwnershipViolation",
    "RunStopped",
    "SafetyCapExceeded",
    "ThreadBusy",
    "UnreadableFact",
    "UnrecordableFact",
]


class AgentError(Exception):
    """Root of every error agentsm raises."""


class BuildError(AgentError):
    """The agent could not be built; the message names what is missing and how to add it."""


class McpServerUnavailable(BuildError):
    """An MCP server could not be started or reached (or did not answer in time); `server` is
    its name, `reason` what went wrong."""

    def __init__(self, server: str, where: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        check = (
            "that an MCP server listens at that URL"
            if where.startswith("http")
            else "that the command starts the server when run by hand (it waits on stdin)"
        )
        super().__init__(
            f"MCP server {server!r} ({where}) could not be reached: {reason}. Check {check}; "
            "a recorded run replays without it."
        )


class AgentFailed(AgentError):
    """The run ended in the Error state. `error` is the reason recorded in the log."""

    def __init__(self, error: str, run_id: str = "") -> None:
        self.error = error
        self.run_id = run_id
        super().__init__(f"Agent failed: {error}")


class HumanInputRequired(AgentError):
    """The run stopped in WaitingForHuman: a call needs approval and no callback was given."""

    def __init__(self, run_id: str, requests: list[ApprovalRequest]) -> None:
        self.run_id = run_id
        self.requests = requests
        names = ", ".join(r.call.name for r in requests)
        super().__init__(
            f"Run {run_id} waits for a human decision on {names}. Give `.on_approval(callback)` "
            "to the builder, or record the decision later and resume the run."
        )


class RunStopped(AgentError):
    """The run stopped at a stop request (`engine.request_stop`, `replay.request_stop`,
    `agentsm stop`, the viewer): status stopped, recorded (`StopRequested`); resuming it goes
    on from there."""

    def __init__(self, run_id: str, reason: str = "") -> None:
        self.run_id = run_id
        self.reason = reason
        why = f" ({reason})" if reason else ""
        super().__init__(
            f"Run {run_id} stopped where it was asked to{why}; continue it with "
            f"`agentsm resume {run_id}` (replay.resume_run)."
        )


class EngineBusy(AgentError):
    """An engine drives one run at a time: `arun()` / `run()` / `stream()` was called while
    the same engine was still running. Nothing was recorded by the refused call."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"This engine is already driving run {run_id}; two drivers at once would interleave "
            "their facts. Await the first run, or build a second engine for a second run."
        )


class ThreadBusy(AgentError):
    """A message was sent to a thread whose last turn has not ended (it waits for a human,
    runs, or stopped), or whose next turn another sender took meanwhile. Nothing was
    recorded for the message."""

    def __init__(self, thread_id: str, run_id: str, reason: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"Thread {thread_id} cannot take the message now: {reason}.")


class EngineError(AgentError):
    """A structural fault: the engine stopped; what was recorded stays in the log."""


class LlmDeadlineExceeded(EngineError):
    """An LLM call was abandoned at its deadline (`AgentConfig.llm_deadline` or
    `run_deadline`); the failure is recorded and the run stopped where it was, resumable."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(
            f"{reason}. The run stopped with this recorded; resume it to try the call again "
            "(`agentsm resume RUN_ID` or replay.resume_run), or raise the deadline."
        )


class InvalidTransition(EngineError):
    """The table has no row for (state, event)."""

    def __init__(self, state: str, event: str) -> None:
        self.state = state
        self.event = event
        super().__init__(
            f"Invalid transition: {state} + {event} is not in the transition table. "
            f"Add a row ({state}, {event}) -> <next state> to the table, or fix the handler "
            f"of {state} so it returns an event the table accepts."
        )


class NoHandlerForState(EngineError):
    """No handler is registered for the current state."""

    def __init__(self, state: str) -> None:
        self.state = state
        super().__init__(
            f"No handler registered for state {state!r}. Register one with "
            f"AgentBuilder.handler({state!r}, handler)."
        )


class SafetyCapExceeded(EngineError):
    """The run took more transitions than the safety cap: a loop in the table or handlers."""

    def __init__(self, transitions: int, cap: int) -> None:
        self.transitions = transitions
        self.cap = cap
        super().__init__(
            f"Safety cap exceeded: {transitions} transitions, cap {cap}. A cycle of the table "
            "does not pass through Planning's step guard; fix the table, or raise "
            "AgentConfig.safety_cap if the run is legitimately long."
        )


_ENGINE_KINDS = frozenset(
    {
        "RunStarted",
        "Transitioned",
        "RunBranched",
        "RunAborted",
        "Steered",
        "StopRequested",
        "QuestionAsked",
        "HumanAnswered",
    }
)


class OwnershipViolation(EngineError):
    """A handler recorded a fact that its state may not record."""

    def __init__(
        self,
        state: str,
        kind: str,
        owners: frozenset[str],
        *,
        declared: frozenset[str] | None = None,
    ) -> None:
        self.state = state
        self.kind = kind
        if declared is not None or (not owners and kind not in _ENGINE_KINDS):
            listed = ", ".join(sorted(declared)) if declared else "nothing"
            super().__init__(
                f"State {state} recorded {kind}, which its handler does not declare (it "
                f"declares {listed}). Declare it: AgentBuilder.handler({state!r}, handler, "
                f"records=[..., {kind}]), or records = frozenset({{..., {kind!r}}}) on the "
                "handler's class."
            )
            return
        if not owners:
            super().__init__(
                f"The handler of {state} recorded {kind}, which only the engine records. Return "
                "an event instead: the engine records the transition the table gives for it."
            )
            return
        super().__init__(
            f"State {state} recorded {kind}, which only {', '.join(sorted(owners))} may record. "
            "Move that work to the owning state's handler."
        )


class HandlerCrashed(EngineError):
    """A handler raised an exception instead of returning an event (a bug in the handler)."""

    def __init__(self, state: str, error: BaseException) -> None:
        self.state = state
        self.error = error
        super().__init__(
            f"The handler of {state} raised {type(error).__name__}: {error}. Handlers return "
            "events; turn recoverable failures into data (an observation) instead of raising."
        )


class UnrecordableFact(EngineError):
    """A fact would not decode to itself (NaN, a lone surrogate, a value JSON cannot hold), so
    it was not recorded: the log only holds what it can give back."""

    def __init__(self, kind: str, problem: str) -> None:
        self.kind = kind
        self.problem = problem
        super().__init__(
            f"{kind} cannot be recorded: {problem}. Nothing was written; give plain JSON values "
            "(finite numbers, valid Unicode text, dicts with string keys, lists)."
        )


class UnreadableFact(AgentError):
    """A stored fact cannot be decoded; only the run that holds it is affected."""

    def __init__(self, run_id: str, seq: int, kind: str, reason: str) -> None:
        self.run_id = run_id
        self.seq = seq
        self.kind = kind
        self.reason = reason
        super().__init__(
            f"Run {run_id} cannot be read: its {kind} fact at seq {seq} does not decode "
            f"({reason}). The log was damaged or written by other software; the other runs "
            "are unaffected."
        )


class FactVersionTooNew(UnreadableFact):
    """A stored fact was written by a newer agentsm, at a version of its kind this code does
    not know."""

    def __init__(self, run_id: str, seq: int, kind: str, version: int, known: int) -> None:
        AgentError.__init__(
            self,
            f"Run {run_id} cannot be read: its {kind} fact at seq {seq} is version {version}, "
            f"newer than version {known} that this agentsm reads. Upgrade agentsm to read this "
            "run; the other runs are unaffected.",
        )
        self.run_id = run_id
        self.seq = seq
        self.kind = kind
        self.reason = f"version {version} is newer than {known}"
        self.version = version
        self.known = known
