"""Questions to a person: the built-in `ask_human` tool (`AgentBuilder.ask_human`), whose call
waits in WaitingForHuman for an answer that becomes its result, and a handler's `ctx.ask`. Both
show in `pending_requests` as requests of kind "question" whose reason is the question."""

from __future__ import annotations

from typing import Any

from .frozen import FrozenDict
from .memory import AgentMemory
from .tools import Tool
from .types import ApprovalRequest, ToolCall

__all__ = ["ASK_HUMAN", "ask_human_tool", "handler_question", "question_of"]

ASK_HUMAN = "ask_human"
"""The name of the built-in tool the LLM asks a person a question with."""

_SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "The question, as the person will read it."}
    },
    "required": ["question"],
    "additionalProperties": False,
}


def ask_human_tool(name: str = ASK_HUMAN, description: str | None = None) -> Tool:
    """The tool the LLM asks a person with: its calls wait for an answer and never run."""

    def never(args: dict[str, Any]) -> str:
        raise RuntimeError(f"{name} is answered by a person (agentsm answer), never run")

    return Tool(
        name,
        description
        or (
            "Ask the person you work for a question when you need something only they know "
            "(a choice, a missing detail, a confirmation); wait for the answer before going on."
        ),
        _SCHEMA,
        never,
    )


def question_of(call: ToolCall) -> str:
    """The question a call of an `ask_human` tool puts to a person."""
    question = call.args.get("question")
    return question if isinstance(question, str) and question.strip() else "(no question given)"


def handler_question(run_id: str, memory: AgentMemory) -> ApprovalRequest | None:
    """The question a handler asked (`ctx.ask`) that waits for its answer, if any: a request
    of kind "question" with index -1, its call standing for no planned call."""
    for n, (question, answer) in enumerate(memory.asked, start=1):
        if answer is None:
            call = ToolCall.model_construct(
                name=ASK_HUMAN, args=FrozenDict({"question": question}), id=f"question-{n}"
            )
            return ApprovalRequest(
                run_id=run_id,
                step=memory.step,
                call=call,
                reason=question,
                index=-1,
                kind="question",
            )
    return None
