"""Varied agents used by several test modules: each exercises a different part of the engine."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentsm import (
    AgentBuilder,
    AgentConfig,
    LlmResponse,
    MockLlmCaller,
    TokenBudget,
    TokenUsage,
    ToolCall,
    tool,
)

LONG = "The answer, which is long enough to be accepted."


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
async def fetch(url: str) -> dict[str, Any]:
    """Fetch a URL (async)."""
    await asyncio.sleep(0)
    return {"url": url, "status": 200}


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


@tool
def transfer(amount: int, to: str) -> str:
    """Move money (needs approval)."""
    return f"sent {amount} to {to}"


def usage(n: int) -> TokenUsage:
    return TokenUsage(input_tokens=n, output_tokens=n // 2)


def base(task: str, script: list[Any], **config: Any) -> AgentBuilder:
    return (
        AgentBuilder(task)
        .system_prompt("You are careful.")
        .llm(MockLlmCaller(script))
        .config(AgentConfig(**config))
        .tool(lookup)
        .tool(fetch)
        .tool(explode)
        .tool(transfer)
    )


def parallel() -> AgentBuilder:
    calls = [
        ToolCall(name="lookup", args={"key": "a"}),
        ToolCall(name="fetch", args={"url": "u"}),
        ToolCall(name="explode", args={"reason": "nope"}),
    ]
    return base(
        "parallel",
        [
            LlmResponse.tool_calls(calls, content="Checking three things.", usage=usage(10)),
            LlmResponse.final_answer(LONG, usage=usage(12)),
        ],
    )


def approvals() -> AgentBuilder:
    decisions = iter([True, {"amount": 5, "to": "bob"}, False, False])

    def decide(request: Any) -> Any:
        return next(decisions)

    return (
        base(
            "approvals",
            [
                LlmResponse.tool_call("transfer", {"amount": 1, "to": "ann"}),
                LlmResponse.tool_call("transfer", {"amount": 500, "to": "bob"}),
                LlmResponse.tool_calls(
                    [
                        ToolCall(name="transfer", args={"amount": 9, "to": "eve"}),
                        ToolCall(name="lookup", args={"key": "k"}),
                    ]
                ),
                LlmResponse.tool_call("transfer", {"amount": 2, "to": "zed"}),
                LlmResponse.final_answer(LONG),
            ],
        )
        .require_approval("transfer")
        .on_approval(decide)
    )


def reflection() -> AgentBuilder:
    script: list[Any] = []
    for i in range(4):
        script.append(LlmResponse.tool_call("lookup", {"key": str(i)}, usage=usage(5)))
        if i % 2 == 1:
            script.append(LlmResponse.final_answer(f"Summary after step {i + 1}.", usage=usage(3)))
    script.append(LlmResponse.tool_call("lookup", {"key": "x"}, confidence=0.1))
    script.append(LlmResponse.final_answer("Summary after low confidence."))
    script.append(LlmResponse.final_answer(LONG))
    return base("reflection", script, reflect_every_n_steps=2)


def failures() -> AgentBuilder:
    return base(
        "failures",
        [
            LlmResponse.tool_call("explode", {"reason": "disk full"}),
            LlmResponse.tool_call("no_such_tool", {}),
            LlmResponse.tool_call("lookup", {"wrong": 1}),
            LlmResponse.final_answer("short"),
            ConnectionError("provider went away"),
        ],
        reflect_every_n_steps=0,
    )


def budget() -> AgentBuilder:
    return base(
        "budget",
        [
            LlmResponse.tool_call("lookup", {"key": "a"}, usage=usage(40)),
            LlmResponse.tool_call("lookup", {"key": "b"}, usage=usage(40)),
            LlmResponse.final_answer(LONG),
        ],
    ).budget(TokenBudget(max_total_tokens=100))


def blacklist() -> AgentBuilder:
    return base(
        "blacklist",
        [
            LlmResponse.tool_call("explode", {"reason": "x"}),
            LlmResponse.tool_call("lookup", {"key": "ok"}),
            LlmResponse.final_answer(LONG),
        ],
    ).blacklist_tool("explode")


def max_steps() -> AgentBuilder:
    return base(
        "max steps",
        [LlmResponse.tool_call("lookup", {"key": str(i)}) for i in range(9)],
        max_steps=3,
    )


SCENARIOS: dict[str, Callable[[], AgentBuilder]] = {
    "parallel": parallel,
    "approvals": approvals,
    "reflection": reflection,
    "failures": failures,
    "budget": budget,
    "blacklist": blacklist,
    "max_steps": max_steps,
}
