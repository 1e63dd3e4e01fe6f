"""A payment agent for workers: submit runs, start workers, kill one, watch another finish.

    agentsm submit "Pay Ann 30" --builder examples/worker_agent.py:make_agent --db pay.db
    agentsm worker --builder examples/worker_agent.py:make_agent --db pay.db --lease 5

Its LLM decides from memory alone (pay, then fetch the receipt, then answer), so any worker
on any host can take any of its runs up at any point. `pay` is not idempotent: it appends a
line to ./payments.txt (AGENTSM_EXAMPLE_LEDGER) with its idempotency key, then takes
AGENTSM_EXAMPLE_PAY_SECONDS (default 3) to confirm: time enough to kill the worker in it.
"""

from __future__ import annotations

import os
import time
from typing import Any

from agentsm import AgentBuilder, AgentConfig, LlmResponse, ToolContext, tool

LEDGER = "AGENTSM_EXAMPLE_LEDGER"


class PaymentPolicy:
    """Pays, fetches the receipt, answers; every decision read from memory."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        done = {e.tool.name: e.observation for e in memory.history}
        if "pay" not in done:
            return LlmResponse.tool_call("pay", {"to": "Ann", "amount": 30}, id="pay")
        if "receipt" not in done:
            return LlmResponse.tool_call("receipt", {}, id="receipt")
        return LlmResponse.final_answer(f"Payment handled: {done['pay']} ({done['receipt']}).")


@tool
def pay(to: str, amount: int) -> str:
    """Pay someone (not idempotent: each call pays again)."""
    context = ToolContext.current()
    key = context.idempotency_key if context else "-"
    with open(os.environ.get(LEDGER, "payments.txt"), "a") as ledger:
        ledger.write(f"{key} paid {amount} to {to}\n")
    time.sleep(float(os.environ.get("AGENTSM_EXAMPLE_PAY_SECONDS", "3")))
    return f"paid {amount} to {to}"


@tool(idempotent=True)
def receipt() -> str:
    """How many payments the ledger holds (idempotent: reading twice is harmless)."""
    with open(os.environ.get(LEDGER, "payments.txt")) as ledger:
        return f"{sum(1 for _ in ledger)} payment(s) on the ledger"


def make_agent(task: str) -> AgentBuilder:
    """What `--builder examples/worker_agent.py:make_agent` names: the agent for a task."""
    return (
        AgentBuilder(task)
        .system_prompt("You make payments.")
        .llm(PaymentPolicy())
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(pay)
        .tool(receipt)
    )
