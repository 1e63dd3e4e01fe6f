"""An agent to talk with in the tests of threads (`--builder tests/thread_agent.py:make_agent`).

Its LLM answers from the conversation it is sent alone, so any process can continue a thread:
each answer says how many user messages it saw and repeats the earlier ones. A message
"look up CITY" calls the `lookup` tool first; a message "fail" makes the LLM fail.
"""

from __future__ import annotations

from typing import Any

from agentsm import AgentBuilder, AgentConfig, LlmResponse, tool


class ConversationLlm:
    """Answers from the messages it is sent; keeps every request's messages in `seen` and the
    memory it was shown in `memories`."""

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []
        self.memories: list[Any] = []

    async def call(self, memory: Any, tools: Any, model: str) -> LlmResponse:
        messages = memory.build_messages()
        self.seen.append(messages)
        self.memories.append(memory)
        said = [m["content"] for m in messages if m["role"] == "user"]
        users = [m for m in said if not m.startswith("Summary of the work so far")]
        task = memory.task
        if task == "fail":
            raise RuntimeError("the model is unavailable")
        own = memory.history[memory.carried :]
        if task.startswith("look up ") and not own:
            return LlmResponse.tool_call("lookup", {"city": task[8:]}, id=f"look-{memory.step}")
        earlier = " / ".join(users[:-1]) or "nothing"
        return LlmResponse.final_answer(f"Answer {len(users)} to {task!r}; earlier: {earlier}")


@tool(idempotent=True)
def lookup(city: str) -> str:
    """Look a city's weather up."""
    return f"{city}: 21 C, sunny"


def make_agent(task: str) -> AgentBuilder:
    return (
        AgentBuilder(task)
        .system_prompt("You are a helpful assistant.")
        .llm(ConversationLlm())
        .tool(lookup)
        .config(AgentConfig(min_answer_length=5))
    )
