"""The demo agent: a research assistant on the scripted mock LLM, with real tools and a log."""

from __future__ import annotations

import ast
import operator
import shlex
from contextlib import closing
from typing import Any

from agentsm import (
    AgentBuilder,
    AgentFailed,
    AgentMemory,
    LlmResponse,
    MockLlmCaller,
    TokenUsage,
    ToolCall,
    tool,
)

__all__ = ["DEMO_TASK", "demo_agent", "demo_script", "run_demo"]

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
    """The demo agent's builder: tools, prompt, config and the scripted LLM, which stands in
    for an OpenAI model."""
    return (
        AgentBuilder(task)
        .name("research assistant")
        .task_type("research")
        .system_prompt("You are a careful research assistant. Use tools; cite numbers.")
        .llm(MockLlmCaller(demo_script(), provider="openai"))
        .model("demo-model")
        .max_steps(8)
        .tool(search)
        .tool(calculator)
        .tool(send_email)
        .blacklist_tool("send_email")
    )


def run_demo(db: str, style: Any, default: str | None = None) -> int:
    """Record a demo run into `db`, print its trace, rebuild its memory from the file, replay
    it, and branch it where the LLM called a blacklisted tool; the closing commands name `db`
    unless it is `default`, the log the commands read without --db."""
    from eventstore import open_store

    from .branching import branch_run
    from .diffing import diff_runs
    from .replaying import replay_run

    engine = demo_agent().store(db).build()
    print(f"Task: {engine.memory.task}")
    try:
        answer = engine.run()
    except AgentFailed as e:
        answer = f"(failed) {e.error}"
    print(f"Answer: {answer}\n")
    print(style(f"Run {engine.run_id} recorded into {db}; its trace:", "bold") + "\n")
    engine.trace().print()
    usage = engine.memory.total_usage
    print(
        f"\nsteps={engine.memory.step} state={engine.current_state()} "
        f"tokens={usage.total_tokens} (in {usage.input_tokens}, out {usage.output_tokens})"
    )
    with closing(open_store(db, create=False)) as fresh:
        memory, state = AgentMemory.rebuild(fresh, engine.run_id)
        same = memory == engine.memory and state == engine.current_state()
        print(
            f"\nMemory rebuilt from {db} by folding {len(engine.trace())} facts: "
            f"{'identical to the engine memory' if same else 'DIFFERENT from the engine memory'} "
            f"(state {state}, {len(memory.history)} history entries)."
        )
        report = replay_run(fresh, engine.run_id, demo_agent)
        print("\n" + style("Replay against the recording: ", "bold") + str(report))
        refused = next(e for e in engine.trace() if e.event == "ToolsRejected")
        at = refused.seq - 1
        branch = branch_run(
            fresh,
            engine.run_id,
            at=at,
            llm_response=LlmResponse.final_answer(
                "Paris is the capital; about 2.1 million people live on its 105.4 km²."
            ),
            builder=demo_agent,
        )
        title = f"Branch {branch.run_id} from seq {branch.point} with another LLM answer:"
        print("\n" + style(title, "bold") + f" {branch.status}")
        for line in branch.lines()[1:]:  # where each LLM response and tool result came from
            print(f"  {line}")
        print(diff_runs(fresh, engine.run_id, branch.run_id))
    explore = ("runs --tree", f"show {engine.run_id}", f"memory {engine.run_id} --at 20")
    print("\nExplore it (each line is a command):")
    where = "" if db == default else f" --db {shlex.quote(db)}"
    for command in (*explore, f"replay {engine.run_id}"):
        print(f"  agentsm{where} {command}")
    print(f"Or see it in the browser: agentsm{where} ui  (the ui extra: pip install 'agentsm[ui]')")
    return 0 if same and report.identical else 1
