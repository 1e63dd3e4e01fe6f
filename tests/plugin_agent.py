"""An agent whose recorded runs the pytest plugin's tests replay
(`--agentsm-builder tests/plugin_agent.py:make_agent`), and changed versions of it."""

from __future__ import annotations

from typing import Any

from agentsm import AgentBuilder, AgentConfig, LlmResponse, tool


class LookupLlm:
    """Looks the task up, then answers with what it found; decides from memory alone."""

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        if not memory.history:
            return LlmResponse.tool_call("lookup", {"key": memory.task}, id="call-1")
        return LlmResponse.final_answer(f"Found: {memory.history[-1].observation}")


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def make_agent(task: str) -> AgentBuilder:
    builder = (
        AgentBuilder(task)
        .system_prompt("Be brief.")
        .llm(LookupLlm())
        .config(AgentConfig(reflect_every_n_steps=0))
        .tool(lookup)
    )
    if task.startswith("Ask"):
        builder.require_approval("lookup")  # no callback: the run waits for a human
    return builder


def reworded(task: str) -> AgentBuilder:
    """The agent with its prompt changed: every run's first LLM request differs."""
    return make_agent(task).system_prompt("Be thorough.")


def reworded_for_b(task: str) -> AgentBuilder:
    """The prompt changed for one task only."""
    return reworded(task) if task.endswith("b") else make_agent(task)


def not_a_builder(task: str) -> str:
    return f"agent for {task}"
