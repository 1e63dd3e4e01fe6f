"""An agent that people steer, question and stop from outside, in the tests of steering,
questions and stopping (`--builder tests/outside_agent.py:make_agent`).

Its LLM calls the `slow` tool at steps 1 and 2, then answers with every user message it was
sent after the task; a task starting with "ask" makes it ask a person first (`ask_human`).
`slow(n)` waits, when `$AGENTSM_TEST_GATE` names a directory, until a file `go-N` appears
there (it writes `started-N` first), so a test can act while the run is under way.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from agentsm import AgentBuilder, AgentConfig, LlmResponse, tool


class SeeingLlm:
    """Keeps the user messages of every request in `seen`."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        messages = memory.build_messages()
        users = [m["content"] for m in messages if m["role"] == "user"]
        self.seen.append(users)
        asked = [m for m in messages if m["role"] == "tool" and m["name"] == "ask_human"]
        if memory.task.startswith("ask") and not asked:
            return LlmResponse.tool_call("ask_human", {"question": "Which city?"}, id="ask-1")
        if memory.step <= 2:
            return LlmResponse.tool_call("slow", {"n": memory.step}, id=f"slow-{memory.step}")
        heard = [m["content"] for m in asked] + users[1:]
        return LlmResponse.final_answer("Heard: " + (" | ".join(heard) or "nothing"))


def gate(n: int) -> None:
    """Wait for `go-N` in `$AGENTSM_TEST_GATE` (if set), after writing `started-N` there."""
    where = os.environ.get("AGENTSM_TEST_GATE")
    if not where:
        return
    folder = Path(where)
    (folder / f"started-{n}").write_text("")
    deadline = time.monotonic() + 60
    while not (folder / f"go-{n}").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"nobody let slow({n}) go on")
        time.sleep(0.01)


@tool(idempotent=True)
def slow(n: int) -> str:
    """Take a while (as long as the test's gate says)."""
    gate(n)
    return f"slow {n} done"


def make_agent(task: str) -> AgentBuilder:
    return (
        AgentBuilder(task)
        .system_prompt("You help.")
        .llm(SeeingLlm())
        .tool(slow)
        .ask_human()
        .config(AgentConfig(min_answer_length=1, reflect_every_n_steps=0))
    )
