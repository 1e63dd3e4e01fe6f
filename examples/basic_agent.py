"""A research agent with one search tool on OpenAI (or any OpenAI-compatible server).

    OPENAI_API_KEY=sk-... python examples/basic_agent.py
    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY=x OPENAI_MODEL=llama3.2 \
        python examples/basic_agent.py
    python examples/basic_agent.py --mock          # offline, scripted LLM
"""

from __future__ import annotations

import argparse
import os

from agentsm import AgentBuilder, LlmCaller, LlmResponse, MockLlmCaller, tool
from agentsm.llm import OpenAiCaller


@tool
def search(query: str) -> str:
    """Search the web for current information. Use it for any factual question."""
    return (
        f"Search results for {query!r}: Paris is the capital of France, with about "
        "2.1 million inhabitants in the city proper."
    )


def llm(mock: bool) -> LlmCaller:
    if mock:
        return MockLlmCaller(
            [
                LlmResponse.tool_call("search", {"query": "capital of France population"}),
                LlmResponse.final_answer(
                    "Paris is the capital of France; about 2.1 million people live in the city."
                ),
            ]
        )
    return OpenAiCaller(base_url=os.environ.get("OPENAI_BASE_URL"), stream=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mock", action="store_true", help="run offline on a scripted LLM")
    parser.add_argument("--db", default="examples.db", help="SQLite log to record into")
    args = parser.parse_args()
    engine = (
        AgentBuilder("What is the capital of France and what is its population?")
        .task_type("research")
        .system_prompt("You are a helpful research assistant. Use the search tool.")
        .llm(llm(args.mock))
        .max_steps(10)
        .tool(search)
        .store(args.db)
        .build()
    )
    print("=== FINAL ANSWER ===\n" + engine.run())
    print("\n=== TRACE ===")
    engine.trace().print()
    print(f"\nrecorded as run {engine.run_id} in {args.db}")


if __name__ == "__main__":
    main()
