"""Hypothesis strategies: LLM behaviour, tool outcomes, approvals and configs, and finished runs
of the real engine built from them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from ..builder import AgentBuilder
from ..context import ToolRunner
from ..llm.mock import MockLlmCaller
from ..tools import ToolOutcome, ToolRegistry, tool
from ..types import AgentConfig, LlmResponse, TokenBudget, TokenUsage, ToolCall
from .reproduce import python_of
from .runs import AgentRun, run_engine
from .watch import watch_handlers

__all__ = [
    "ToolBehaviour",
    "agent_runs",
    "approval_decisions",
    "configs",
    "llm_responses",
    "llm_scripts",
    "run_inputs",
    "sample_agent",
    "tool_behaviours",
]

UNKNOWN_TOOL = "no_such_tool"
BLACKLISTED_TOOL = "forbidden"


@dataclass(frozen=True)
class ToolBehaviour:
    """What a tool does when called: succeed, raise, time out, or succeed slowly."""

    kind: str
    value: str = "ok"

    def __repr__(self) -> str:
        return f"ToolBehaviour({self.kind!r}, {self.value!r})"


def texts(max_size: int) -> st.SearchStrategy[str]:
    """Any text a model or a tool may produce (no lone surrogates). Characters are drawn by
    Unicode category, not by codec: hypothesis works a codec's character set out once per
    project, a second of CPU a fresh project would pay."""
    return st.text(st.characters(exclude_categories=["Cs"]), max_size=max_size)


def usages() -> st.SearchStrategy[TokenUsage | None]:
    """Token usage of one LLM call, or none reported."""
    return st.none() | st.builds(
        TokenUsage, input_tokens=st.integers(0, 400), output_tokens=st.integers(0, 120)
    )


def _args() -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(
        st.sampled_from(["key", "url", "n", "text"]),
        st.one_of(texts(6), st.integers(0, 9)),
        max_size=2,
    )


def llm_responses(tool_names: Sequence[str]) -> st.SearchStrategy[Any]:
    """One LLM behaviour: a tool call (to a known, unknown or blacklisted tool, at any
    confidence), several calls at once, a final answer of any length, or a provider failure."""
    names = st.sampled_from([*dict.fromkeys([*tool_names, UNKNOWN_TOOL])])
    calls = st.builds(lambda n, a: ToolCall(name=n, args=a), names, _args())
    confidence = st.sampled_from([1.0, 1.0, 0.9, 0.3, 0.05])
    one = st.builds(
        lambda c, conf, u: LlmResponse(calls=(c,), confidence=conf, usage=u),
        calls,
        confidence,
        usages(),
    )
    several = st.builds(
        lambda cs, u: LlmResponse.tool_calls(cs, usage=u),
        st.lists(calls, min_size=2, max_size=3),
        usages(),
    )
    answer = st.builds(
        lambda t, u: LlmResponse.final_answer(t, usage=u),
        texts(40) | st.just("A complete answer, long enough to keep."),
        usages(),
    )
    failure = st.sampled_from(
        [ConnectionError("provider went away"), TimeoutError("read timed out")]
    )
    return st.one_of(one, one, several, several, answer, answer, failure)


def llm_scripts(tool_names: Sequence[str], max_size: int = 12) -> st.SearchStrategy[list[Any]]:
    """A whole scripted conversation, often closed by an acceptable final answer (when it runs
    out, the mock fails like a provider)."""
    closing = st.sampled_from(
        [[LlmResponse.final_answer("All done: a complete final answer.")], []]
    )
    return st.builds(
        lambda body, end: body + end,
        st.lists(llm_responses(tool_names), max_size=max_size),
        closing,
    )


LONG_OUTPUT = "\n".join(f"row {i}: some output of a tool" for i in range(24))
"""A tool output of many lines: what fills a small context window and gets cut."""


def tool_behaviours() -> st.SearchStrategy[ToolBehaviour]:
    """Success (with some text, now and then many lines of it), an exception, a timeout, or a
    slow success."""
    return st.one_of(
        st.builds(lambda v: ToolBehaviour("success", v), texts(12)),
        st.just(ToolBehaviour("success", LONG_OUTPUT)),
        st.just(ToolBehaviour("exception", "tool broke")),
        st.just(ToolBehaviour("timeout")),
        st.just(ToolBehaviour("slow")),
    )


def approval_decisions() -> st.SearchStrategy[Any]:
    """What a human answers: approve, reject, new arguments, or nothing yet (the run waits)."""
    return st.one_of(
        st.just(True),
        st.just(False),
        st.fixed_dictionaries({"key": texts(4)}),
        st.none(),
    )


def configs() -> st.SearchStrategy[AgentConfig]:
    """Configurations across their interesting ranges; now and then a context window small
    enough for compaction (or, smallest, for a request that cannot fit at all)."""
    window = st.one_of(st.none(), st.none(), st.sampled_from([120, 300, 450, 600, 600]))
    return st.builds(
        _with_window,
        window,
        st.sampled_from([0, 0, 40]),
        st.sampled_from([1, 2, 50]),
        _configs(),
    )


def _with_window(
    window: int | None, reserve: int, max_lines: int, config: AgentConfig
) -> AgentConfig:
    if window is None:
        return config
    return config.model_copy(
        update={
            "context_window": window,
            "context_reserve": reserve,
            "tool_output_max_lines": max_lines,
        }
    )


def _configs() -> st.SearchStrategy[AgentConfig]:
    return st.builds(
        AgentConfig,
        max_steps=st.sampled_from([6, 3, 1, 8, 0]),
        max_retries=st.integers(0, 3),
        confidence_threshold=st.sampled_from([0.0, 0.4, 0.95]),
        reflect_every_n_steps=st.integers(0, 4),
        min_answer_length=st.sampled_from([0, 5, 20]),
        parallel_tools=st.booleans(),
        tool_timeout=st.just(0.02),
    )


async def _behave(behaviour: ToolBehaviour) -> str:
    if behaviour.kind == "exception":
        raise RuntimeError(behaviour.value)
    if behaviour.kind == "timeout":
        await asyncio.sleep(1.0)
    if behaviour.kind == "slow":
        await asyncio.sleep(0.005)
    return behaviour.value


@tool(name="lookup")
async def _lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(name="fetch")
def _fetch(url: str, n: int = 1) -> str:
    """Fetch a URL n times."""
    return f"{url} x{n}"


@tool(name="ping", idempotent=True)
async def _ping() -> str:
    """Ping."""
    return "pong"


@tool(name=BLACKLISTED_TOOL)
def _forbidden(text: str = "") -> str:
    """Never allowed."""
    return "ran"


def sample_agent(task: str) -> AgentBuilder:
    """The agent generated runs use when no builder is given: tools of every shape (async,
    sync with a default, idempotent, blacklisted) and one that needs approval (made once, at
    import: a tool's schema is worked out from its signature, which is not free)."""
    return (
        AgentBuilder(task)
        .tool(_lookup)
        .tool(_fetch)
        .tool(_ping)
        .tool(_forbidden)
        .blacklist_tool(BLACKLISTED_TOOL)
        .require_approval("fetch")
    )


def _runner(
    tools: ToolRegistry, behaviours: dict[str, ToolBehaviour], timeout: float
) -> ToolRunner:
    """Calls get the generated behaviour instead of running the user's tool; unknown tools and
    invalid arguments are refused by the registry exactly as in a real run."""

    async def run(call: ToolCall) -> ToolOutcome:
        refused = tools.refusal(call.name, call.args)
        if refused is not None:
            return refused
        behaviour = behaviours.get(call.name, ToolBehaviour("success"))
        try:
            return ToolOutcome.ok(await asyncio.wait_for(_behave(behaviour), timeout))
        except TimeoutError:
            return ToolOutcome.failed("TimeoutError", f"tool '{call.name}' did not finish")
        except Exception as e:
            return ToolOutcome.failed(type(e).__name__, str(e))

    return run


def agent_runs(
    builder: Callable[[str], AgentBuilder] | None = None,
    *,
    max_script: int = 12,
    config: st.SearchStrategy[AgentConfig] | None = None,
    behaviours: st.SearchStrategy[ToolBehaviour] | None = None,
) -> st.SearchStrategy[AgentRun]:
    """Finished runs of the real engine: the user's agent (`builder(task)`, or a built-in one)
    driven by a generated LLM script, tool outcomes, approvals, config and budget. `config` and
    `behaviours` narrow what is generated (default: `configs()`, `tool_behaviours()`)."""
    names = (builder or sample_agent)("a generated task").tools.names()
    kinds = tool_behaviours() if behaviours is None else behaviours

    @st.composite
    def runs(draw: st.DrawFn) -> AgentRun:
        script = draw(llm_scripts(names, max_script), label="script")
        chosen = draw(configs() if config is None else config, label="config")
        outcomes = {n: draw(kinds, label=f"tool {n}") for n in names}
        decisions = draw(st.lists(approval_decisions(), max_size=4), label="decisions")
        budget = draw(st.none() | st.integers(50, 1500), label="budget")
        return run_inputs(script, chosen, outcomes, decisions, budget, builder=builder)

    return runs()


def run_inputs(
    script: Sequence[Any],
    config: AgentConfig,
    tools: dict[str, ToolBehaviour],
    decisions: Sequence[Any],
    budget: int | None,
    builder: Callable[[str], AgentBuilder] | None = None,
) -> AgentRun:
    """Run the agent (`builder(task)`, or the built-in one) on these inputs through the real
    engine; what `agent_runs` draws, and what its failure reports print."""
    return drive(
        builder or sample_agent,
        config,
        None if budget is None else TokenBudget(max_total_tokens=budget),
        script,
        decisions,
        lambda registry: _runner(registry, dict(tools), config.tool_timeout or 0.05),
        python_of(script, config, tools, decisions, budget, builder),
    )


def drive(
    make: Callable[[str], AgentBuilder],
    config: AgentConfig,
    budget: TokenBudget | None,
    script: Sequence[Any],
    decisions: Sequence[Any],
    runner: Callable[[ToolRegistry], ToolRunner],
    source: str,
    task: str = "a generated task",
) -> AgentRun:
    """Run `make(task)` with this config and budget on a scripted LLM, the human's answers in
    order (approve once they run out) and tool calls served by `runner(registry)`, through the
    real engine, watching every fact and every event its handlers return."""

    def configured(t: str) -> AgentBuilder:
        agent = make(t).config(config)
        if budget is not None:
            agent.budget(budget)
        return agent

    answers = iter(decisions)
    agent = configured(task).llm(MockLlmCaller(list(script)))
    agent.on_approval(lambda request: next(answers, True))
    served: list[ToolRunner] = []

    async def serve(call: ToolCall) -> ToolOutcome:
        return await served[0](call)

    agent.tool_runner(serve)
    engine = agent.build()
    served.append(runner(engine.tools))  # the built agent's tools: an MCP server's among them
    returned = watch_handlers(engine)
    observed, outcome, escaped = run_engine(engine)
    return AgentRun(
        engine, observed, outcome, escaped, source, replay_builder=configured, returned=returned
    )
