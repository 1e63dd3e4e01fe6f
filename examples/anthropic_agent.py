"""A Claude agent with tools, streaming its text as it arrives.

ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic_agent.py
ANTHROPIC_MODEL=claude-haiku-4-5 ANTHROPIC_API_KEY=... python examples/anthropic_agent.py
python examples/anthropic_agent.py --mock      # offline, scripted LLM
"""

from __future__ import annotations

import argparse
import asyncio
import os

from agentsm import (
    AgentBuilder,
    FinalAnswer,
    LlmCaller,
    LlmResponse,
    MockLlmCaller,
    TextDelta,
    ToolFinished,
    tool,
)
from agentsm.llm import AnthropicCaller


@tool
def get_weather(location: str, units: str = "c") -> str:
    """Look up the weather for a city, in celsius ('c') or fahrenheit ('f')."""
    return f"{location}: 20°{units.upper()}, sunny"


def llm(mock: bool) -> LlmCaller:
    if mock:
        return MockLlmCaller(
            [
                LlmResponse.tool_call(
                    "get_weather", {"location": "San Francisco, CA", "units": "f"}
                ),
                LlmResponse.final_answer("It is sunny in San Francisco, about 20°F on this tool."),
            ]
        )
    return AnthropicCaller.from_env(base_url=os.environ.get("ANTHROPIC_BASE_URL"), stream=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mock", action="store_true", help="run offline on a scripted LLM")
    parser.add_argument("--db", default="examples.db", help="SQLite log to record into")
    args = parser.parse_args()
    engine = (
        AgentBuilder("What is the weather in SF?")
        .system_prompt("You are Claude, a concise assistant. Use tools for facts.")
        .llm(llm(args.mock))
        .tool(get_weather)
        .store(args.db)
        .build()
    )
    async for out in engine.stream():
        if isinstance(out, TextDelta):
            print(out.text, end="", flush=True)
        elif isinstance(out, ToolFinished):
            print(f"\n[tool] {out.call.name} -> {out.observation}")
        elif isinstance(out, FinalAnswer):
            print(f"\n=== FINAL ANSWER ===\n{out.content}")
    print(f"tokens used: {engine.memory.total_usage.total_tokens}")


if __name__ == "__main__":
    asyncio.run(main())
