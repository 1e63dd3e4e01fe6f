"""An agent for worker tests (`--builder tests/worker_agent.py:make_agent`).

Its LLM decides from memory alone, so any process can take any of its runs up at any point.
It appends one line to the ledger (a non-idempotent effect, keyed by the call's idempotency
key), reads it back with an idempotent tool, and answers. AGENTSM_TEST_LEDGER names the
ledger; AGENTSM_TEST_PAUSE (seconds) makes each tool take up to that long, so that a kill
lands inside tools too.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from agentsm import AgentBuilder, AgentConfig, LlmResponse, ToolContext, tool


def _pause() -> None:
    pause = float(os.environ.get("AGENTSM_TEST_PAUSE") or 0)
    if pause:
        time.sleep(random.uniform(0, pause))


class LedgerLlm:
    """Writes once, reads once, then answers; every decision read from memory."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        done = [e.tool.name for e in memory.history]
        if "write" not in done:
            return LlmResponse.tool_call("write", {"text": memory.task}, id=f"w{memory.step}")
        if "count" not in done:
            return LlmResponse.tool_call("count", {}, id=f"c{memory.step}")
        return LlmResponse.final_answer(f"Recorded: {memory.history[-1].observation}")


@tool
def write(text: str) -> str:
    """Append a line to the ledger (not idempotent)."""
    context = ToolContext.current()
    key = context.idempotency_key if context else "?"
    _pause()
    with open(os.environ["AGENTSM_TEST_LEDGER"], "a") as ledger:
        ledger.write(f"{key} {text}\n")
    _pause()
    return f"wrote {key}"


@tool(idempotent=True)
def count() -> str:
    """How many lines the ledger holds (idempotent)."""
    _pause()
    with open(os.environ["AGENTSM_TEST_LEDGER"]) as ledger:
        return f"{sum(1 for _ in ledger)} lines"


def make_agent(task: str) -> AgentBuilder:
    return (
        AgentBuilder(task)
        .system_prompt("You keep a ledger.")
        .llm(LedgerLlm())
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(write)
        .tool(count)
    )
