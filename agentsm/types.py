"""Plain data shared by the whole engine: states, tool calls, LLM responses, config, usage."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from .frozen import FrozenDict, JsonObject
from .images import Image

__all__ = [
    "AgentConfig",
    "ApprovalRequest",
    "HistoryEntry",
    "LlmResponse",
    "ParentCall",
    "McpServerSpec",
    "ReasoningPart",
    "State",
    "ThreadTurn",
    "TokenBudget",
    "TokenUsage",
    "ToolCall",
    "ToolResult",
    "ToolSchema",
]


class State(StrEnum):
    """The nine built-in states; a custom table may add its own states as plain strings."""

    Idle = "Idle"
    Planning = "Planning"
    Acting = "Acting"
    ParallelActing = "ParallelActing"
    WaitingForHuman = "WaitingForHuman"
    Observing = "Observing"
    Reflecting = "Reflecting"
    Done = "Done"
    Error = "Error"

    def is_terminal(self) -> bool:
        """Done and Error end a run: the engine exits when it reaches one."""
        return self in (State.Done, State.Error)

    def __repr__(self) -> str:
        return f"State.{self.name}"


TERMINAL_STATES: frozenset[str] = frozenset({State.Done, State.Error})


def as_state(name: str) -> str:
    """`State(name)` for a built-in state, the plain name for a custom one."""
    try:
        return State(name)
    except ValueError:
        return name


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def new_call_id() -> str:
    """A fresh tool-call id, used when the LLM (or a script) gives none."""
    return "call_" + uuid.uuid4().hex[:16]


class ToolCall(_Frozen):
    """A tool invocation requested by the LLM; `id` ties the call to its result. `args` is
    read-only (a `FrozenDict`): tools get a plain copy of it."""

    name: str
    args: JsonObject = Field(default_factory=FrozenDict)
    id: str = Field(default_factory=new_call_id)


class TokenUsage(_Frozen):
    """Tokens consumed by one LLM call, or summed over a run."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    """Of `output_tokens`, those the model spent reasoning (counted there too)."""

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if not self.reasoning_tokens and isinstance(data, dict):
            data.pop("reasoning_tokens", None)  # written and digested as before it was counted
        return data

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens: what a budget counts."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ReasoningPart(_Frozen):
    """A piece of the reasoning a model returned with its answer, recorded with it.

    `kind` and `text` are for display: "thinking" (the model's thinking text), "summary" (a
    summary of hidden reasoning) or "redacted" (encrypted, no text). `native` is the exact
    object the provider returned (an Anthropic `thinking` block with its `signature`, a
    `redacted_thinking` block, an OpenAI reasoning item with `encrypted_content`, ...), which
    later requests must send back unchanged; `provider` names the API whose wire format it is
    in (e.g. "anthropic"), so that a caller sends back only the parts its own API made.
    """

    kind: Literal["thinking", "summary", "redacted"] = "thinking"
    text: str = ""
    provider: str = ""
    native: JsonObject = Field(default_factory=FrozenDict)

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 40 else self.text[:39] + "…"
        return f"ReasoningPart({self.kind}, {shown!r}, provider={self.provider!r})"


def _without_empty_reasoning(model: BaseModel, handler: SerializerFunctionWrapHandler) -> Any:
    """The model as its fields give it, with `reasoning` left out when there is none: a value
    without reasoning is written (and digested) exactly as before reasoning was recorded."""
    data = handler(model)
    if not model.__dict__["reasoning"] and isinstance(data, dict):
        data.pop("reasoning", None)
    return data


def _without_empty(
    model: BaseModel, handler: SerializerFunctionWrapHandler, names: tuple[str, ...]
) -> Any:
    """The model as its fields give it, with each of `names` left out when it is empty: a
    value without them is written (and digested) exactly as before they were recorded."""
    data = handler(model)
    if isinstance(data, dict):
        for name in names:
            if not model.__dict__[name]:
                data.pop(name, None)
    return data


class TokenBudget(_Frozen):
    """A ceiling on the tokens a run may spend; checked before every LLM call."""

    max_total_tokens: int = Field(gt=0)


class LlmResponse(_Frozen):
    """What an LLM call returns: tool calls (one or several) or a final answer.

    `content` is the final answer when there are no calls, or the text that came with them.
    `stop_reason` is what the provider said (e.g. "max_tokens" when the answer was cut off);
    `model` and `system_fingerprint` are what the server says answered (None when unknown).
    `reasoning` is what the model returned of its reasoning, in order (see `ReasoningPart`).
    `response_id` is the provider's id of this response and `server` the origin
    (`scheme://host[:port]`) of the server that gave it, where the caller knows them.
    """

    calls: tuple[ToolCall, ...] = ()
    content: str | None = None
    confidence: float = 1.0
    usage: TokenUsage | None = None
    stop_reason: str | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    reasoning: tuple[ReasoningPart, ...] = ()
    response_id: str | None = None
    server: str | None = None

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = _without_empty_reasoning(self, handler)
        if isinstance(data, dict):  # written and digested as before they were recorded
            for name in ("response_id", "server"):
                if data.get(name, 0) is None:
                    del data[name]
        return data

    @classmethod
    def tool_call(
        cls,
        name: str,
        args: dict[str, Any] | None = None,
        confidence: float = 1.0,
        *,
        usage: TokenUsage | None = None,
        id: str | None = None,
    ) -> LlmResponse:
        """One tool call."""
        call = ToolCall(name=name, args=args or {}, **({"id": id} if id else {}))
        return cls(calls=(call,), confidence=confidence, usage=usage)

    @classmethod
    def tool_calls(
        cls,
        calls: list[ToolCall] | tuple[ToolCall, ...],
        confidence: float = 1.0,
        *,
        usage: TokenUsage | None = None,
        content: str | None = None,
    ) -> LlmResponse:
        """Several tool calls in one response (run in parallel when `parallel_tools` is on)."""
        if not calls:
            raise ValueError("LlmResponse.tool_calls needs at least one ToolCall.")
        return cls(calls=tuple(calls), confidence=confidence, usage=usage, content=content)

    @classmethod
    def final_answer(cls, content: str, *, usage: TokenUsage | None = None) -> LlmResponse:
        """The LLM's final answer: the task is complete."""
        return cls(content=content, usage=usage)

    @property
    def is_final(self) -> bool:
        """True when this is a final answer rather than tool calls."""
        return not self.calls

    def __repr__(self) -> str:
        if self.is_final:
            text = (self.content or "")[:60]
            return f"LlmResponse.final_answer({text!r})"
        names = ", ".join(f"{c.name}({c.args})" for c in self.calls)
        return f"LlmResponse.tool_calls([{names}], confidence={self.confidence})"


class ToolResult(_Frozen):
    """The outcome of one planned call, waiting for Observing to commit it to history.
    `index` is the call's position among the step's planned calls (ids may repeat);
    `images` are the images the tool returned with its observation."""

    call: ToolCall
    observation: str
    success: bool
    index: int | None = None
    images: tuple[Image, ...] = ()

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_empty(self, handler, ("images",))


class HistoryEntry(_Frozen):
    """A completed tool call and what came of it; the LLM sees every entry on its next call.

    Entries of one planning step form one assistant turn. `text` is what the LLM said alongside
    its calls, and `reasoning` the reasoning it returned with them (both on the turn's first
    entry). A `[SUMMARY]` entry stands for history compressed by reflection. `images` are
    those the tool returned (or, for an earlier message of a thread, those it carried).
    """

    step: int
    tool: ToolCall
    observation: str
    success: bool
    text: str | None = None
    reasoning: tuple[ReasoningPart, ...] = ()
    images: tuple[Image, ...] = ()

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_empty(self, handler, ("reasoning", "images"))

    @property
    def is_summary(self) -> bool:
        """True for the single entry left by history compression."""
        return self.tool.name == SUMMARY_TOOL

    @property
    def said(self) -> str | None:
        """ "user" for an earlier message of the thread, "assistant" for an earlier turn's
        answer (see `ThreadTurn`), None for a tool call or a summary. Only the entries a turn
        starts with (`AgentMemory.carried`) are read this way."""
        return _SAID.get(self.tool.name)

    @classmethod
    def message(cls, turn: int, text: str, images: tuple[Image, ...] = ()) -> HistoryEntry:
        """An earlier user message of a thread (with its images), as the turns after it carry
        it."""
        call = ToolCall(name=USER_MESSAGE, args={}, id=f"turn-{turn}-message")
        return cls(step=0, tool=call, observation=text, success=True, images=images)

    @classmethod
    def answer(cls, turn: int, text: str, *, failed: bool = False) -> HistoryEntry:
        """An earlier turn's final answer (or, `failed`, the error that ended it)."""
        call = ToolCall(name=TURN_ANSWER, args={}, id=f"turn-{turn}-answer")
        return cls(step=0, tool=call, observation=text, success=not failed)


SUMMARY_TOOL = "[SUMMARY]"
USER_MESSAGE = "[USER]"
TURN_ANSWER = "[ANSWER]"
_SAID = {USER_MESSAGE: "user", TURN_ANSWER: "assistant"}


class ThreadTurn(_Frozen):
    """Where a run stands in a thread (a conversation of runs, one per user message): thread
    `id`, its place `turn` (from 1), and the run of the turn before it, `previous`, whose
    log ended at `previous_seq` (None for a thread's first turn). `branched_from` names the
    thread this one was branched from, on the first turn it does not share with it."""

    id: str
    turn: int = Field(ge=1)
    previous: str | None = None
    previous_seq: int | None = None
    branched_from: str | None = None

    def info(self) -> dict[str, Any]:
        """What the run catalog keeps of it (`RunRecord.info["thread"]`)."""
        return {"thread": self.model_dump(mode="json", exclude_none=True)}

    def __repr__(self) -> str:
        after = f", after {self.previous}@{self.previous_seq}" if self.previous else ""
        origin = f", branched from {self.branched_from!r}" if self.branched_from else ""
        return f"ThreadTurn({self.id!r}, turn {self.turn}{after}{origin})"


class ToolSchema(_Frozen):
    """What the LLM is told about a tool: name, description, JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ApprovalRequest(_Frozen):
    """A tool call waiting for a human decision; `index` is its position among the step's
    planned calls, which names it even when the LLM gave two calls the same id. For a call that
    started and never reported, `idempotency_key` is the key its effect was made with (the
    tool's `ToolContext.idempotency_key`): look it up at the other end to see if it happened.

    `kind` "question" is a question to a person, `reason` the question: a call of the
    `ask_human` tool (`AgentBuilder.ask_human`), or a handler's `ctx.ask`, whose request has
    `index` -1 and stands for no planned call. Its answer is text (`replay.answer`)."""

    run_id: str
    step: int
    call: ToolCall
    reason: str = "tool requires approval"
    index: int = 0
    idempotency_key: str = ""
    kind: Literal["approval", "question"] = "approval"


class AgentConfig(_Frozen):
    """Limits and switches of the agent's behaviour (the specification's fields and a few more).

    `models` maps a task type (or "default") to a model name. `safety_cap` bounds the number of
    transitions of one run; by default it is `6 * max_steps + 10` (`7 * ...` with a context
    window, for the compaction a step may need first), enough for the longest cycle
    of the default table (plan, approve, act, observe, reflect) at every step.

    Deadlines, in seconds (None: none): `llm_deadline` bounds one LLM call, retries included;
    `run_deadline` bounds the LLM calls of one execution of the run (`run()`, `arun()`,
    `stream()` or a resume), from its start. An LLM call past either is abandoned, recorded
    as failed, and the run stops where it is (`LlmDeadlineExceeded`), resumable.

    Context limits (see `agentsm.window`): with `context_window` (tokens; None: no limit) each
    planning request must fit in `context_window - context_reserve` (the reserve is room for
    the answer); one that would not is compacted first, old tool outputs cut to
    `tool_output_max_lines` lines before older steps are dropped.
    """

    max_steps: int = Field(default=15, ge=0)
    max_retries: int = Field(default=3, ge=0)
    confidence_threshold: float = 0.4
    reflect_every_n_steps: int = Field(default=5, ge=0)
    min_answer_length: int = Field(default=20, ge=0)
    parallel_tools: bool = True
    models: dict[str, str] = Field(default_factory=dict)
    tool_timeout: float | None = Field(default=60.0, gt=0)
    safety_cap: int | None = Field(default=None, gt=0)
    llm_deadline: float | None = Field(default=1200.0, gt=0)
    run_deadline: float | None = Field(default=None, gt=0)
    context_window: int | None = Field(default=None, gt=0)
    context_reserve: int = Field(default=0, ge=0)
    tool_output_max_lines: int = Field(default=50, ge=1)

    @model_validator(mode="after")
    def _reserve_fits(self) -> AgentConfig:
        if self.context_window is not None and self.context_reserve >= self.context_window:
            raise ValueError(
                f"context_reserve={self.context_reserve} leaves no room in "
                f"context_window={self.context_window}; make the reserve smaller than the window."
            )
        return self

    def context_limit(self) -> int | None:
        """The most tokens a request may take: the window less the reserve (None: no limit)."""
        if self.context_window is None:
            return None
        return self.context_window - self.context_reserve

    def effective_safety_cap(self) -> int:
        """The number of transitions after which the engine stops with SafetyCapExceeded."""
        if self.safety_cap is not None:
            return self.safety_cap
        per_step = 6 if self.context_window is None else 7
        return per_step * self.max_steps + 10

    def model_for(self, task_type: str) -> str:
        """`models[task_type]`, else `models["default"]`, else "" (the caller's own default)."""
        return self.models.get(task_type, self.models.get("default", ""))


class ParentCall(_Frozen):
    """Where a sub-agent run comes from: the parent run and the call of it that started the
    child (the seq of the call's first start in the parent's log, its planning step and its
    position among that step's calls, and the sub-agent tool's name)."""

    run_id: str
    seq: int
    step: int
    position: int
    tool: str

    def __repr__(self) -> str:
        where = f"step={self.step}, position={self.position}"
        return f"ParentCall({self.run_id}@{self.seq}, {self.tool!r}, {where})"


class McpServerSpec(_Frozen):
    """An MCP server as a run's definition records it: how it was reached and the names of the
    tools it offered (their schemas are among the run's tools). Values of environment variables
    and HTTP headers are not recorded, only their names: they often hold secrets."""

    name: str
    transport: Literal["stdio", "http"]
    command: str = ""
    args: tuple[str, ...] = ()
    url: str = ""
    env: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    prefix: str = ""
    tools: tuple[str, ...] = ()
