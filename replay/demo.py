"""The demo agent: a research assistant on the scripted mock LLM, with real tools and a log."""

from __future__ import annotations

import ast
import operator
from typing import Any

from agentsm import (
    AgentBuilder,
    LlmResponse,
    MockLlmCaller,
    TokenUsage,
    ToolCall,
    tool,
)

__all__ = ["DEMO_TASK", "demo_agent", "demo_script"]

DEMO_TASK = "What is the capital of France, and how many people live there per square km?"

_FACTS = {
    "capital of france": "Paris is the capital of France.",
    "population of paris": "Paris has about 2,102,650 inhabitants (2023).",
    "area of paris": "Paris covers 105.4 square kilometres.",
}


@tool(idempotent=True)
def search(query: str) -> str:
    """Search a small offline encyclopedia."""
    return _FACTS.get(query.lower().strip(), f"No results for {query!r}.")


_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.operand)))
    raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")


@tool(idempotent=True)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression (+ - * / and parentheses)."""
    return f"{_evaluate(ast.parse(expression, mode='eval').body):.2f}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email (blacklisted in the demo)."""
    return f"sent to {to}"


def demo_script() -> list[LlmResponse]:
    """What the scripted LLM answers, in order."""
    return [
        LlmResponse.tool_call(
            "search",
            {"query": "capital of France"},
            usage=TokenUsage(input_tokens=412, output_tokens=21),
        ),
        LlmResponse.tool_calls(
            [
                ToolCall(name="search", args={"query": "population of Paris"}, id="call_pop"),
                ToolCall(name="search", args={"query": "area of Paris"}, id="call_area"),
            ],
            content="I need the population and the area; I will look both up at once.",
            usage=TokenUsage(input_tokens=498, output_tokens=44),
        ),
        LlmResponse.tool_call(
            "send_email",
            {"to": "boss@example.com", "body": "Paris!"},
            usage=TokenUsage(input_tokens=640, output_tokens=30),
        ),
        LlmResponse.tool_call(
            "calculator",
            {"expression": "2102650 / 105.4"},
            usage=TokenUsage(input_tokens=702, output_tokens=25),
        ),
        LlmResponse.final_answer(
            "Paris is the capital of France. With about 2,102,650 people on 105.4 km², "
            "it has roughly 19,949 inhabitants per square kilometre.",
            usage=TokenUsage(input_tokens=760, output_tokens=48),
        ),
    ]


def demo_agent(task: str = DEMO_TASK) -> AgentBuilder:
    """The demo agent's builder: tools, prompt, config and the scripted LLM."""
    return (
        AgentBuilder(task)
        .task_type("research")
        .system_prompt("You are a careful research assistant. Use tools; cite numbers.")
        .llm(MockLlmCaller(demo_script()))
        .model("demo-model")
        .max_steps(8)
        .tool(search)
        .tool(calculator)
        .tool(send_email)
        .blacklist_tool("send_email")
    )
