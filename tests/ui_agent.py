"""An agent for the web viewer's tests (`--builder tests/ui_agent.py:make_agent`): it asks to
pay (a call that needs a human's approval), then answers with text holding markup, which the
page must show as text. Its LLM decides from memory alone, so any process can resume it."""

from __future__ import annotations

from typing import Any

from agentsm import AgentBuilder, LlmResponse, TokenUsage, tool

ANSWER = "Paid <script>window.pwned = 1</script> <b>done</b>"


class PayingLlm:
    """Pays once, then answers."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        if not memory.history:
            return LlmResponse.tool_call(
                "pay",
                {"amount": 12},
                id=f"p{memory.step}",
                usage=TokenUsage(input_tokens=100, output_tokens=10),
            )
        return LlmResponse.final_answer(
            f"{ANSWER} ({memory.history[-1].observation})",
            usage=TokenUsage(input_tokens=150, output_tokens=20),
        )


@tool
def pay(amount: int) -> str:
    """Pay an amount (needs a human's approval)."""
    return f"paid {amount}"


def make_agent(task: str) -> AgentBuilder:
    return (
        AgentBuilder(task)
        .llm(PayingLlm())
        .model("pay-model")
        .tool(pay)
        .require_approval("pay")
        .max_steps(5)
    )
