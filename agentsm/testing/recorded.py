"""Generated runs seeded by real ones: recorded runs, mutated the way real traffic nearly goes
(a tool call dropped or repeated, arguments corrupted, an answer cut short or empty, a tool
result turned into an error, other token usage), run again through the engine and checked
against the same invariants as any generated run."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from eventstore import EventStore, SQLiteEventStore, UnknownRun

from .. import facts as f
from ..builder import AgentBuilder
from ..context import ToolRunner
from ..errors import BuildError
from ..skills import SkillSet
from ..tools import ToolOutcome, ToolRegistry
from ..trace import Trace
from ..types import LlmResponse, TokenUsage, ToolCall
from .reproduce import _builder_lines
from .runs import AgentRun
from .strategies import drive, texts

__all__ = ["MUTATIONS", "Mutation", "Recorded", "from_recorded", "recorded_runs", "run_recorded"]

MUTATIONS = (
    "drop_call",
    "duplicate_call",
    "corrupt_args",
    "truncate_answer",
    "empty_answer",
    "tool_error",
    "change_usage",
)
"""The kinds of `Mutation`, each something real traffic does now and then."""


@dataclass(frozen=True)
class Mutation:
    """One change to a recorded run's inputs. `at` is the LLM response (or, for `tool_error`,
    the tool result) it changes, counted from 0 in the run's order; `index` the tool call in
    that response; `value` the new arguments, length, usage or error message."""

    kind: str
    at: int = 0
    index: int = 0
    value: Any = None

    def __post_init__(self) -> None:
        if self.kind not in MUTATIONS:
            raise ValueError(f"Unknown mutation {self.kind!r}; use one of: {', '.join(MUTATIONS)}.")

    def __repr__(self) -> str:
        value = f", value={self.value!r}" if self.value is not None else ""
        return f"Mutation({self.kind!r}, at={self.at}, index={self.index}{value})"


@dataclass(frozen=True)
class Recorded:
    """What a recorded run was given from outside: its definition, the LLM's answers (an
    exception for a failed call), the tool results in order and the human's decisions."""

    run_id: str
    definition: f.RunStarted
    script: tuple[Any, ...]
    results: tuple[f.ToolExecuted, ...]
    decisions: tuple[Any, ...] = field(default=())
    parent_task: str | None = None
    """For a sub-agent run, the task of the parent run whose call started it (when the log
    holds that run): how the parent's builder makes the child agent again."""

    @classmethod
    def of(cls, trace: Trace) -> Recorded:
        """The inputs of one recorded run."""
        facts = trace.facts()
        definition = facts[0]
        if not isinstance(definition, f.RunStarted):
            raise BuildError(f"Run {trace.run_id!r} does not start with RunStarted.")
        script: list[Any] = []
        decisions: list[Any] = []
        for fact in facts:
            if isinstance(fact, f.LlmResponded):
                script.append(fact.response)
            elif isinstance(fact, f.LlmFailed):
                script.append(ConnectionError(f"{fact.error_type}: {fact.message}"))
            elif isinstance(fact, f.HumanDecided):
                decisions.extend(_answer(d) for d in fact.decisions)
        results = tuple(x for x in facts if isinstance(x, f.ToolExecuted))
        return cls(trace.run_id, definition, tuple(script), results, tuple(decisions))

    def mutated(self, mutations: Iterable[Mutation]) -> Recorded:
        """These inputs with each mutation applied in turn (one that no longer fits, say a
        call index past the calls left, changes nothing)."""
        script, results = list(self.script), list(self.results)
        for m in mutations:
            if m.kind == "tool_error":
                if m.at < len(results):
                    old = results[m.at]
                    results[m.at] = old.model_copy(
                        update={
                            "observation": f"ERROR: RuntimeError: {m.value or 'tool failed'}",
                            "success": False,
                            "error_type": "RuntimeError",
                        }
                    )
                continue
            if m.at >= len(script) or not isinstance(script[m.at], LlmResponse):
                continue
            script[m.at] = _change(script[m.at], m)
        return replace(self, script=tuple(script), results=tuple(results))

    def __repr__(self) -> str:
        return (
            f"Recorded(run_id={self.run_id!r}, responses={len(self.script)}, "
            f"tool_results={len(self.results)})"
        )


def _answer(decision: f.Decision) -> Any:
    if decision.verdict == "modified":
        return dict(decision.args or {})
    return decision.verdict == "approved"


def _change(response: LlmResponse, m: Mutation) -> LlmResponse:
    calls = list(response.calls)
    if m.kind == "change_usage":
        return response.model_copy(update={"usage": m.value})
    if m.kind in ("truncate_answer", "empty_answer"):
        if calls:
            return response
        cut = "" if m.kind == "empty_answer" else (response.content or "")[: int(m.value or 0)]
        return response.model_copy(update={"content": cut})
    if m.index >= len(calls):
        return response
    if m.kind == "drop_call":
        del calls[m.index]
    elif m.kind == "duplicate_call":
        calls.insert(m.index, calls[m.index])
    elif m.kind == "corrupt_args":
        calls[m.index] = calls[m.index].model_copy(update={"args": dict(m.value or {})})
    return response.model_copy(update={"calls": tuple(calls)})


def _open(db: str | Path | EventStore) -> EventStore:
    if isinstance(db, EventStore):
        return db
    return SQLiteEventStore(db, read_only=True, create=False)


def recorded_runs(db: str | Path | EventStore, runs: Sequence[str] | None = None) -> list[Recorded]:
    """The inputs of the runs in a log (all of them, or the ids in `runs`)."""
    store = _open(db)
    try:
        every = [r.run_id for r in store.runs() if not r.info.get("judgement")]  # agent runs
        ids = list(runs) if runs is not None else every
        corpus = [_with_parent(store, Recorded.of(Trace.load(store, run_id))) for run_id in ids]
    finally:
        if store is not db:
            store.close()
    if not corpus:
        raise BuildError(
            f"No recorded runs in {db!r} to start from; record some runs into it first "
            "(AgentBuilder(...).store(path)), or point at another log."
        )
    return corpus


def _with_parent(store: EventStore, recorded: Recorded) -> Recorded:
    """The recorded run with its parent's task, for a sub-agent run whose parent is in the log."""
    link = recorded.definition.parent_call
    if link is None:
        return recorded
    try:
        first = Trace.load(store, link.run_id).facts()[:1]
    except UnknownRun:
        return recorded
    if not first or not isinstance(first[0], f.RunStarted):
        return recorded
    return replace(recorded, parent_task=first[0].task)


def _agent_of(
    builder: Callable[[str], AgentBuilder], recorded: Recorded
) -> Callable[[str], AgentBuilder]:
    """The user's agent for a recorded run: for a sub-agent run given its parent's builder, the
    child agent the parent's sub-agent tool makes (as resume, replay and branch run it)."""
    from ..subagent import SubAgentTool  # the sub-agent module builds on the builder

    link = recorded.definition.parent_call
    if link is None or recorded.parent_task is None:
        return builder
    made = builder(recorded.parent_task).tools.get(link.tool)
    return made.builder_for if isinstance(made, SubAgentTool) else builder


def _recorded_agent(definition: f.RunStarted) -> Callable[[str], AgentBuilder]:
    """An agent with the recorded tools' schemas and flags, for when no builder is given: its
    tools are never run, only their recorded results are served."""

    def make(task: str) -> AgentBuilder:
        agent = AgentBuilder(task).system_prompt(definition.system_prompt)
        for schema in definition.tools:
            agent.tool(
                schema.name,
                schema.description,
                dict(schema.input_schema),
                lambda args: "",
                idempotent=schema.name in definition.idempotent_tools,
            )
        for name in definition.blacklisted_tools:
            agent.blacklist_tool(name)
        for name in definition.approval_required:
            agent.require_approval(name)
        if definition.skills:  # the index the recorded run showed; read_skill is served
            agent.skills(SkillSet.recorded(definition.skills))
        return agent

    return make


def _served(results: Sequence[f.ToolExecuted]) -> Callable[[ToolRegistry], ToolRunner]:
    """Tool calls get the recorded results of the same tool, in order (a success once they run
    out); unknown tools and invalid arguments are refused by the registry as in a real run."""

    def runner(tools: ToolRegistry) -> ToolRunner:
        queues: dict[str, deque[f.ToolExecuted]] = {}
        for r in results:
            if r.call is not None:  # always, for results read through a Trace
                queues.setdefault(r.call.name, deque()).append(r)

        async def run(call: ToolCall) -> ToolOutcome:
            refused = tools.refusal(call.name, call.args)
            if refused is not None:
                return refused
            queue = queues.get(call.name)
            if not queue:
                return ToolOutcome.ok("")
            r = queue.popleft()
            return ToolOutcome(r.observation, r.success, r.error_type)

        return run

    return runner


def _where(db: str | Path | EventStore) -> str:
    return str(db) if not isinstance(db, EventStore) else str(getattr(db, "path", "your.db"))


def run_recorded(
    db: str | Path | EventStore,
    run_id: str,
    mutations: Sequence[Mutation] = (),
    builder: Callable[[str], AgentBuilder] | None = None,
    *,
    recorded: Recorded | None = None,
) -> AgentRun:
    """Run a recorded run's inputs again, with `mutations`, through the real engine and the
    user's agent (`builder(task)`; by default one with the recorded tools' schemas). Tool
    calls get the recorded results, the LLM the recorded answers; what `from_recorded` draws
    and what its failure reports print."""
    inputs = recorded or recorded_runs(db, [run_id])[0]
    changed = inputs.mutated(mutations)
    definition = changed.definition
    imports, builder_line = _builder_lines(builder)
    agent = _agent_of(builder, changed) if builder else None
    source = "\n".join(
        [
            "from agentsm.testing import Mutation, run_recorded",
            *imports,
            "",
            "run = run_recorded(",
            f"    {_where(db)!r},",
            f"    {run_id!r},",
            f"    {list(mutations)!r},",
            builder_line.replace("the built-in sample agent", "the recorded tools' schemas"),
            ")",
            "# run.save('failing-run.db')  # then: agentsm show --db failing-run.db",
            "run.assert_invariants()",
        ]
    )
    return drive(
        (lambda t: agent(t).mcp_recorded(definition)) if agent else _recorded_agent(definition),
        definition.config,
        definition.budget,
        changed.script,
        changed.decisions,
        _served(changed.results),
        source,
        task=definition.task,
    )


def _mutations(recorded: Recorded, most: int) -> st.SearchStrategy[list[Mutation]]:
    """1 to `most` mutations that fit a recorded run: only responses with calls lose or repeat
    one, only final answers are cut short (none for a run with nothing to change)."""
    responses = [r for r in recorded.script if isinstance(r, LlmResponse)]
    positions = [i for i, r in enumerate(recorded.script) if isinstance(r, LlmResponse)]
    with_calls = [i for i in positions if recorded.script[i].calls]
    answers = [i for i in positions if not recorded.script[i].calls]
    choices: list[st.SearchStrategy[Mutation]] = []
    junk = st.dictionaries(
        st.sampled_from(["", "id", "query", "n", "unexpected"]),
        st.one_of(st.none(), st.integers(-5, 5), texts(5), st.just([1, 2])),
        max_size=3,
    )
    if with_calls:
        at = st.sampled_from(with_calls)
        index = st.integers(0, 2)
        for kind in ("drop_call", "duplicate_call"):
            choices.append(st.builds(Mutation, st.just(kind), at, index))
        choices.append(st.builds(Mutation, st.just("corrupt_args"), at, index, junk))
    if answers:
        at = st.sampled_from(answers)
        choices.append(st.builds(Mutation, st.just("empty_answer"), at))
        choices.append(
            st.builds(Mutation, st.just("truncate_answer"), at, st.just(0), st.integers(0, 12))
        )
    if recorded.results:
        choices.append(
            st.builds(
                Mutation,
                st.just("tool_error"),
                st.integers(0, len(recorded.results) - 1),
                st.just(0),
                st.sampled_from(["tool failed", "connection reset", "quota exceeded"]),
            )
        )
    if responses:
        usage = st.none() | st.builds(
            TokenUsage, input_tokens=st.integers(0, 100_000), output_tokens=st.integers(0, 20_000)
        )
        choices.append(
            st.builds(
                Mutation, st.just("change_usage"), st.sampled_from(positions), st.just(0), usage
            )
        )
    return st.lists(st.one_of(choices), min_size=1, max_size=most) if choices else st.just([])


def from_recorded(
    db: str | Path | EventStore,
    builder: Callable[[str], AgentBuilder] | None = None,
    *,
    runs: Sequence[str] | None = None,
    max_mutations: int = 3,
) -> st.SearchStrategy[AgentRun]:
    """Runs of the real engine seeded by the runs recorded in `db` (all, or the ids in `runs`):
    each is a recorded run with 1 to `max_mutations` mutations (see `MUTATIONS`), run again
    with your agent (`builder`) on the recorded LLM answers and tool results. Check them with
    `run.assert_invariants()`, as any generated run."""
    corpus = recorded_runs(db, runs)

    @st.composite
    def mutated(draw: st.DrawFn) -> AgentRun:
        recorded = draw(st.sampled_from(corpus), label="recorded run")
        changes = draw(_mutations(recorded, max_mutations), label="mutations")
        return run_recorded(db, recorded.run_id, changes, builder, recorded=recorded)

    return mutated()
