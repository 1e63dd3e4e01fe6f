"""agentsm: LLM agents as an explicit, event-sourced hybrid state machine.

A transition table is the single source of truth, small state handlers do the work, a dumb
engine connects them, and every fact of a run goes into an append-only SQLite log from which
memory is rebuilt.

Every exported name is imported on first use (`agentsm.AgentBuilder` loads the builder, the
provider callers load their SDKs), so importing one small module of the package, as the
`agentsm` command does, costs only that module.
"""

from typing import TYPE_CHECKING

from eventstore.lazy import exports

if TYPE_CHECKING:
    from .builder import AgentBuilder
    from .context import SUSPEND, RunContext
    from .custom import CustomFact
    from .engine import AgentEngine
    from .errors import (
        AgentError,
        AgentFailed,
        BuildError,
        EngineBusy,
        EngineError,
        FactVersionTooNew,
        HandlerCrashed,
        HumanInputRequired,
        InvalidTransition,
        LlmDeadlineExceeded,
        McpServerUnavailable,
        NoHandlerForState,
        OwnershipViolation,
        RunStopped,
        SafetyCapExceeded,
        ThreadBusy,
        UnreadableFact,
        UnrecordableFact,
    )
    from .events import Event
    from .facts import UnknownFact
    from .frozen import FrozenDict, FrozenList, thaw
    from .history import History
    from .hooks import Abort, GuardInput, Refuse, Replace, ToolCallInfo, TurnInfo, Veto
    from .llm import (
        AnthropicCaller,
        AzureOpenAiCaller,
        AzureOpenAiResponsesCaller,
        BedrockCaller,
        GeminiCaller,
        LlmCaller,
        MockLlmCaller,
        OpenAiCaller,
        OpenAiResponsesCaller,
    )
    from .mcp import McpServer
    from .memory import AgentMemory, apply, fold
    from .outputs import (
        AgentOutput,
        ApprovalNeeded,
        FinalAnswer,
        ReasoningDelta,
        RunErrored,
        SteerTaken,
        StopTaken,
        TextDelta,
        TextRetracted,
        ToolFinished,
        ToolPartial,
        ToolProgress,
        ToolStarted,
        TransitionTaken,
    )
    from .skills import Skill, SkillSet
    from .states import AgentState
    from .subagent import SubAgentTool
    from .threads import Thread
    from .tools import Tool, ToolContext, ToolOutcome, ToolRegistry, tool
    from .trace import Trace, TraceEntry
    from .transitions import TransitionTable, build_transition_table
    from .types import (
        AgentConfig,
        ApprovalRequest,
        HistoryEntry,
        LlmResponse,
        McpServerSpec,
        ParentCall,
        ReasoningPart,
        State,
        ThreadTurn,
        TokenBudget,
        TokenUsage,
        ToolCall,
        ToolResult,
        ToolSchema,
    )
    from .window import ContextEstimate, estimate_request

__version__ = "0.4.1"

__all__ = [
    "SUSPEND",
    "Abort",
    "AgentBuilder",
    "AgentConfig",
    "AgentEngine",
    "AgentError",
    "AgentFailed",
    "AgentMemory",
    "AgentOutput",
    "AgentState",
    "AnthropicCaller",
    "ApprovalNeeded",
    "ApprovalRequest",
    "AzureOpenAiCaller",
    "AzureOpenAiResponsesCaller",
    "BedrockCaller",
    "BuildError",
    "ContextEstimate",
    "CustomFact",
    "EngineBusy",
    "EngineError",
    "Event",
    "FactVersionTooNew",
    "FinalAnswer",
    "FrozenDict",
    "FrozenList",
    "GeminiCaller",
    "GuardInput",
    "HandlerCrashed",
    "History",
    "HistoryEntry",
    "HumanInputRequired",
    "InvalidTransition",
    "LlmCaller",
    "LlmDeadlineExceeded",
    "LlmResponse",
    "McpServer",
    "McpServerSpec",
    "McpServerUnavailable",
    "MockLlmCaller",
    "NoHandlerForState",
    "OpenAiCaller",
    "OpenAiResponsesCaller",
    "OwnershipViolation",
    "ParentCall",
    "ReasoningDelta",
    "ReasoningPart",
    "Refuse",
    "Replace",
    "RunContext",
    "RunErrored",
    "RunStopped",
    "SafetyCapExceeded",
    "Skill",
    "SkillSet",
    "State",
    "SteerTaken",
    "StopTaken",
    "SubAgentTool",
    "TextDelta",
    "TextRetracted",
    "Thread",
    "ThreadBusy",
    "ThreadTurn",
    "TokenBudget",
    "TokenUsage",
    "Tool",
    "ToolCall",
    "ToolCallInfo",
    "ToolContext",
    "ToolFinished",
    "ToolOutcome",
    "ToolPartial",
    "ToolProgress",
    "ToolRegistry",
    "ToolResult",
    "ToolSchema",
    "ToolStarted",
    "Trace",
    "TraceEntry",
    "TransitionTable",
    "TransitionTaken",
    "TurnInfo",
    "UnknownFact",
    "UnreadableFact",
    "UnrecordableFact",
    "Veto",
    "apply",
    "build_transition_table",
    "estimate_request",
    "fold",
    "thaw",
    "tool",
]

_LAZY: dict[str, tuple[str, ...]] = {
    ".builder": ("AgentBuilder",),
    ".context": ("SUSPEND", "RunContext"),
    ".custom": ("CustomFact",),
    ".engine": ("AgentEngine",),
    ".errors": (
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
    ),
    ".events": ("Event",),
    ".facts": ("UnknownFact",),
    ".frozen": ("FrozenDict", "FrozenList", "thaw"),
    ".history": ("History",),
    ".hooks": ("Abort", "GuardInput", "Refuse", "Replace", "ToolCallInfo", "TurnInfo", "Veto"),
    ".llm": (
        "AnthropicCaller",
        "AzureOpenAiCaller",
        "AzureOpenAiResponsesCaller",
        "BedrockCaller",
        "GeminiCaller",
        "LlmCaller",
        "MockLlmCaller",
        "OpenAiCaller",
        "OpenAiResponsesCaller",
    ),
    ".mcp": ("McpServer",),
    ".memory": ("AgentMemory", "apply", "fold"),
    ".outputs": (
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
    ),
    ".skills": ("Skill", "SkillSet"),
    ".states": ("AgentState",),
    ".subagent": ("SubAgentTool",),
    ".threads": ("Thread",),
    ".tools": ("Tool", "ToolContext", "ToolOutcome", "ToolRegistry", "tool"),
    ".trace": ("Trace", "TraceEntry"),
    ".transitions": ("TransitionTable", "build_transition_table"),
    ".types": (
        "AgentConfig",
        "ApprovalRequest",
        "HistoryEntry",
        "LlmResponse",
        "McpServerSpec",
        "ParentCall",
        "ReasoningPart",
        "State",
        "ThreadTurn",
        "TokenBudget",
        "TokenUsage",
        "ToolCall",
        "ToolResult",
        "ToolSchema",
    ),
    ".window": ("ContextEstimate", "estimate_request"),
}
"""Where each exported name lives, by module."""

__getattr__, __dir__ = exports(__name__, globals(), _LAZY)
