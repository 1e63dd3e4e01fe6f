"""A parent agent that delegates to a sub-agent, for the sub-agent tests (in-process, in a
killed subprocess, and as `--builder tests/subagent_agent.py:make_agent`).

Both LLMs decide from memory alone, so any process can take either run up at any point. The
parent asks the `researcher` sub-agent once (every call with the same LLM call id, "c1") and
answers with what it observed; the child notes its task with a tool, then answers.
AGENTSM_TEST_KILL=1 makes the child's LLM end the process on its second call (after its tool
ran), as a kill would; AGENTSM_TEST_KILL=note ends it in the child's tool.
"""

from __future__ import annotations

import os
from typing import Any

from agentsm import AgentBuilder, LlmResponse, TokenUsage, ToolCall, tool

CHILD_PROMPT = "You research one question and answer it in a sentence."


class ParentLlm:
    """Delegates the task to the researcher, then answers with its observation."""

    def __init__(self, calls: int = 1, usage: int = 10) -> None:
        self.calls = calls
        self.usage = TokenUsage(input_tokens=usage // 2, output_tokens=usage - usage // 2)

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        if not memory.history:
            calls = [
                ToolCall(name="researcher", args={"task": f"{memory.task} (part {i + 1})"}, id="c1")
                for i in range(self.calls)
            ]
            if len(calls) == 1:
                return LlmResponse.tool_call(
                    calls[0].name, dict(calls[0].args), id="c1", usage=self.usage
                )
            return LlmResponse.tool_calls(calls, usage=self.usage)
        seen = " | ".join(e.observation for e in memory.history)
        return LlmResponse.final_answer(f"The researcher reported: {seen}", usage=self.usage)


class ChildLlm:
    """Notes the task, then answers with the system prompt's first word and the task."""

    def __init__(self, usage: int = 20) -> None:
        self.usage = TokenUsage(input_tokens=usage // 2, output_tokens=usage - usage // 2)
        self.calls = 0

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        self.calls += 1
        if not memory.history:
            return LlmResponse.tool_call("note", {"text": memory.task}, id="n1", usage=self.usage)
        if os.environ.get("AGENTSM_TEST_KILL") == "1":
            os._exit(9)  # the process dies in the child's second LLM call
        word = memory.system_prompt.split()[0]
        return LlmResponse.final_answer(
            f"{word} found the answer to {memory.task}", usage=self.usage
        )


@tool
def note(text: str) -> str:
    """Note a line."""
    if os.environ.get("AGENTSM_TEST_KILL") == "note":
        os._exit(9)  # the process dies while the child's tool runs (it is not idempotent)
    return f"noted {text}"


def researcher(task: str, prompt: str = CHILD_PROMPT, llm: Any = None) -> AgentBuilder:
    """The child agent: its own prompt, tool, LLM and step limit."""
    return (
        AgentBuilder(task)
        .system_prompt(prompt)
        .llm(llm or ChildLlm())
        .tool(note)
        .max_steps(4)
        .model("child-model")
    )


def make_agent(task: str) -> AgentBuilder:
    """The parent agent."""
    return (
        AgentBuilder(task)
        .system_prompt("You delegate research.")
        .llm(ParentLlm())
        .subagent("researcher", "Delegate one research question.", researcher)
    )
