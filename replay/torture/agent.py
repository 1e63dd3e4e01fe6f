"""The agent of the worker torture harness (`replay.torture`, `--builder
replay.torture.agent:make_agent`).

Its LLM decides from memory alone, so any process can take any of its runs up at any point:
it calls `write` (not idempotent) AGENTSM_TORTURE_WRITES times (default 2), then `count`
(idempotent), then answers. Every execution of a tool inserts one row into the ledger, the
SQLite file AGENTSM_TORTURE_LEDGER, keyed by the call's idempotency key, so that an effect
that happened twice shows. What a process records carries its pid (`@pid=N` in the LLM's call
ids and answer, and in each tool's result), so that the harness can tell who wrote each fact.
AGENTSM_TORTURE_PAUSE (seconds, at most 1) makes each tool take up to twice that long and each
LLM call up to half, so that faults land inside them too. The tools' timeout is short
(TOOL_TIMEOUT), so that a worker that takes a run over from a stalled one waits that long at
most before it asks whether the write under way took effect.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

from agentsm import AgentBuilder, AgentConfig, LlmResponse, ToolContext, tool

from .ledger import open_ledger

TOOL_TIMEOUT = 3.0
LEDGER_ENV = "AGENTSM_TORTURE_LEDGER"
PAUSE_ENV = "AGENTSM_TORTURE_PAUSE"
WRITES_ENV = "AGENTSM_TORTURE_WRITES"


def _pause_seconds() -> float:
    return random.uniform(0, float(os.environ.get(PAUSE_ENV) or 0))


def _record(tool_name: str, idempotent: bool) -> str:
    """Insert the row of one execution; its key."""
    context = ToolContext.current()
    key = context.idempotency_key if context else "?"
    run_id = context.run_id if context else "?"
    conn = open_ledger(os.environ[LEDGER_ENV])
    try:
        conn.execute(
            "INSERT INTO effects VALUES (?, ?, ?, ?, ?, ?)",
            (key, run_id, tool_name, int(idempotent), os.getpid(), time.time()),
        )
    finally:
        conn.close()
    return key


class TortureLlm:
    """Writes WRITES times, counts once, answers; every decision read from memory."""

    def __repr__(self) -> str:
        return f"TortureLlm(writes={int(os.environ.get(WRITES_ENV) or 2)})"

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        await asyncio.sleep(_pause_seconds() / 2)
        pid = os.getpid()
        names = [e.tool.name for e in memory.history]
        writes = names.count("write")
        if writes < int(os.environ.get(WRITES_ENV) or 2):
            text = f"{memory.task} #{writes + 1}"
            return LlmResponse.tool_call("write", {"text": text}, id=f"w{memory.step}@pid={pid}")
        if "count" not in names:
            return LlmResponse.tool_call("count", {}, id=f"c{memory.step}@pid={pid}")
        return LlmResponse.final_answer(f"{writes} entries recorded @pid={pid}")


@tool
def write(text: str) -> str:
    """Record an entry in the ledger (not idempotent)."""
    time.sleep(_pause_seconds())
    key = _record("write", idempotent=False)
    time.sleep(_pause_seconds())
    return f"wrote {key} @pid={os.getpid()}"


@tool(idempotent=True)
def count() -> str:
    """How many rows the ledger holds (idempotent)."""
    time.sleep(_pause_seconds())
    _record("count", idempotent=True)
    conn = open_ledger(os.environ[LEDGER_ENV])
    try:
        rows = conn.execute("SELECT count(*) FROM effects").fetchone()[0]
    finally:
        conn.close()
    return f"{rows} rows @pid={os.getpid()}"


def make_agent(task: str) -> AgentBuilder:
    """The torture agent for `task`: the `--builder` of the harness's workers."""
    return (
        AgentBuilder(task)
        .system_prompt("You keep a ledger.")
        .llm(TortureLlm())
        .config(AgentConfig(reflect_every_n_steps=0, tool_timeout=TOOL_TIMEOUT))
        .tool(write)
        .tool(count)
    )
