"""agentsm: LLM agents as an explicit, event-sourced hybrid state machine.

A transition table is the single source of truth, small state handlers do the work, a dumb
engine connects them, and every fact of a run goes into an append-only SQLite log from which
memory is rebuilt.

The provider callers (`OpenAiCaller`, `AnthropicCaller`, ...) are imported on first use: their
SDKs load then.
"""

from typing import TYPE_CHECKING, Any

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
from .llm import LlmCaller, MockLlmCaller
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

if TYPE_CHECKING:
    from .llm import (
        AnthropicCaller,
        AzureOpenAiCaller,
        AzureOpenAiResponsesCaller,
        BedrockCaller,
        GeminiCaller,
        OpenAiCaller,
        OpenAiResponsesCaller,
    )

__version__ = "0.3.0"

__all__ = [
    "SUSPEND",
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
    "ToolContext",
    "ToolFinished",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResult",
    "ToolSchema",
    "ToolStarted",
    "Trace",
    "TraceEntry",
    "TransitionTable",
    "TransitionTaken",
    "UnknownFact",
    "UnreadableFact",
    "UnrecordableFact",
    "apply",
    "build_transition_table",
    "estimate_request",
    "fold",
    "thaw",
    "tool",
]


_PROVIDER_CALLERS = frozenset(
    {
        "AnthropicCaller",
        "AzureOpenAiCaller",
        "AzureOpenAiResponsesCaller",
        "BedrockCaller",
        "GeminiCaller",
        "OpenAiCaller",
        "OpenAiResponsesCaller",
    }
)


def __getattr__(name: str) -> Any:
    if name in _PROVIDER_CALLERS:
        from . import llm

        return getattr(llm, name)
    raise AttributeError(f"module 'agentsm' has no attribute {name!r}")
