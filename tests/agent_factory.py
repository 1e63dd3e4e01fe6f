"""An agent for the CLI and cross-process tests (`--builder tests/agent_factory.py:make_agent`).

Its LLM decides from memory alone, so a fresh process can resume any of its runs.
"""

from __future__ import annotations

import os
import time
from typing import Any

from agentsm import AgentBuilder, AgentConfig, LlmResponse, tool

LEDGER = os.environ.get("AGENTSM_TEST_LEDGER", "")


class PolicyLlm:
    """Pays once, looks the balance up, then answers; every decision read from memory."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        done = [e.tool.name for e in memory.history]
        if "pay" not in done:
            return LlmResponse.tool_call(
                "pay", {"amount": 30, "to": "ann"}, id=f"pay-{memory.step}"
            )
        if "balance" not in done:
            return LlmResponse.tool_call("balance", {}, id=f"bal-{memory.step}")
        return LlmResponse.final_answer(f"Paid; history: {[e.observation for e in memory.history]}")


@tool
def pay(amount: int, to: str) -> str:
    """Pay someone (not idempotent: it appends to the ledger)."""
    if LEDGER:
        with open(LEDGER, "a") as f:
            f.write(f"{amount} {to}\n")
    if os.environ.get("AGENTSM_TEST_SLOW"):
        time.sleep(60)
    return f"paid {amount} to {to}"


@tool(idempotent=True)
def balance() -> str:
    """Read the balance (idempotent)."""
    if os.environ.get("AGENTSM_TEST_SLOW_BALANCE"):
        time.sleep(60)
    return "balance 70"


def make_agent(task: str) -> AgentBuilder:
    builder = (
        AgentBuilder(task)
        .system_prompt("You pay people.")
        .llm(PolicyLlm())
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(pay)
        .tool(balance)
    )
    if os.environ.get("AGENTSM_TEST_APPROVAL"):
        builder.require_approval("pay")
    return builder
