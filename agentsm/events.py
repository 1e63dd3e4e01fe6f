"""Event: the control events returned by handlers, the edges of the transition graph."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Event"]


class Event(StrEnum):
    """Control events of the default table; a custom table may add events as plain strings."""

    Start = "Start"
    LlmToolCall = "LlmToolCall"
    LlmParallelToolCalls = "LlmParallelToolCalls"
    LlmFinalAnswer = "LlmFinalAnswer"
    MaxSteps = "MaxSteps"
    LowConfidence = "LowConfidence"
    AnswerTooShort = "AnswerTooShort"
    ToolBlacklisted = "ToolBlacklisted"
    HumanApprovalRequired = "HumanApprovalRequired"
    BudgetExceeded = "BudgetExceeded"
    FatalError = "FatalError"
    HumanApproved = "HumanApproved"
    HumanRejected = "HumanRejected"
    HumanModified = "HumanModified"
    HumanApprovedBatch = "HumanApprovedBatch"
    ToolSuccess = "ToolSuccess"
    ToolFailure = "ToolFailure"
    ToolOutcomeUnknown = "ToolOutcomeUnknown"
    Continue = "Continue"
    NeedsReflection = "NeedsReflection"
    ReflectDone = "ReflectDone"
    ContextFull = "ContextFull"
    InputRejected = "InputRejected"
    HookAborted = "HookAborted"

    def __repr__(self) -> str:
        return f"Event.{self.name}"
