"""Several tools, a blacklisted tool, and task types mapped to models, on OpenAI.

OPENAI_API_KEY=sk-... python examples/multi_tool_agent.py
python examples/multi_tool_agent.py --mock     # offline, scripted LLM
"""

from __future__ import annotations

import argparse
import os

from agentsm import AgentBuilder, AgentConfig, LlmCaller, LlmResponse, MockLlmCaller, ToolCall, tool
from agentsm.llm import OpenAiCaller


@tool
def search(query: str) -> str:
    """Search for facts."""
    return "Tokyo: 14.1 million people; Delhi: 33.8 million people (metro)."


@tool(idempotent=True)
def calculator(a: float, b: float, op: str) -> float:
    """Apply op (+, -, *, /) to a and b."""
    return {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[op]


@tool
def weather(city: str) -> str:
    """Current weather in a city."""
    return f"{city}: 24°C, clear"


@tool
def delete_files(path: str) -> str:
    """Delete files (blacklisted: the agent may never run it)."""
    raise RuntimeError("never runs")


def llm(mock: bool) -> LlmCaller:
    if mock:
        return MockLlmCaller(
            [
                LlmResponse.tool_calls(
                    [
                        ToolCall(name="search", args={"query": "population Tokyo Delhi"}),
                        ToolCall(name="weather", args={"city": "Tokyo"}),
                    ]
                ),
                LlmResponse.tool_call("delete_files", {"path": "/tmp/cache"}),
                LlmResponse.tool_call("calculator", {"a": 33.8, "b": 14.1, "op": "-"}),
                LlmResponse.final_answer(
                    "Delhi's metro area has about 19.7 million more people than Tokyo; "
                    "Tokyo is 24°C and clear."
                ),
            ]
        )
    return OpenAiCaller(base_url=os.environ.get("OPENAI_BASE_URL"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mock", action="store_true", help="run offline on a scripted LLM")
    parser.add_argument("--db", default="examples.db", help="SQLite log to record into")
    args = parser.parse_args()
    config = AgentConfig(max_steps=8, reflect_every_n_steps=0, parallel_tools=True)
    engine = (
        AgentBuilder(
            "How many more people live in Delhi than in Tokyo, and how is Tokyo's weather?"
        )
        .task_type("calculation")
        .config(config)
        .model(os.environ.get("OPENAI_MODEL", "gpt-4o"))  # the default tier
        .model_for("calculation", os.environ.get("OPENAI_SMALL_MODEL", "gpt-4o-mini"))
        .llm(llm(args.mock))
        .tool(search)
        .tool(calculator)
        .tool(weather)
        .tool(delete_files)
        .blacklist_tool("delete_files")
        .store(args.db)
        .build()
    )
    print("=== FINAL ANSWER ===\n" + engine.run())
    engine.trace().print()
    print(f"\nmodel used: {engine.memory.config.model_for(engine.memory.task_type)}")


if __name__ == "__main__":
    main()
