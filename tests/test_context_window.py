"""Context limits: a run with a context window counts each request (the provider's count plus an
estimate of what is new) and compacts history before a request that would not fit, instead of
failing with context-length exceeded; the cut is recorded, folds, replays and branches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agentsm import (
    AgentBuilder,
    AgentConfig,
    AgentFailed,
    AgentMemory,
    HistoryEntry,
    LlmResponse,
    MockLlmCaller,
    TokenUsage,
    ToolCall,
    ToolRegistry,
    estimate_request,
    tool,
)
from agentsm import facts as f
from agentsm.memory import fold
from agentsm.states.reflecting import compression_view
from agentsm.testing import ToolBehaviour, agent_runs, configs
from agentsm.testing.strategies import LONG_OUTPUT
from agentsm.trace import Trace
from agentsm.window import (
    compacted,
    compaction,
    cut_chars,
    cut_lines,
    estimate_tokens,
    message_tokens,
    schema_tokens,
)
from eventstore import SQLiteEventStore
from replay import assert_replays, branch_run, memory_at

WINDOW = 3000


class SmallModel:
    """A provider with a context window: it counts a request its own way (3 characters a token,
    not the 4 agentsm estimates), refuses one that is too long as providers do, and reports its
    count as the usage of each answer."""

    def __init__(self, script: list[LlmResponse], window: int = WINDOW) -> None:
        self.script = list(script)
        self.window = window
        self.counts: list[int] = []

    async def call(self, memory: AgentMemory, tools: ToolRegistry, model: str) -> LlmResponse:
        schemas = [s.model_dump(mode="json") for s in tools.schemas()]
        count = len(json.dumps([memory.build_messages(), schemas], ensure_ascii=False)) // 3
        if count > self.window:
            raise RuntimeError(
                f"context_length_exceeded: {count} tokens, the maximum is {self.window}"
            )
        self.counts.append(count)
        response = self.script.pop(0)
        return response.model_copy(update={"usage": TokenUsage(input_tokens=count)})


@tool
def read_page(n: int) -> str:
    """Read page n of the manual."""
    return "\n".join(f"page {n}, line {i}: the manual goes on and on." for i in range(40))


def pages(count: int) -> list[LlmResponse]:
    return [LlmResponse.tool_call("read_page", {"n": i}) for i in range(1, count + 1)] + [
        LlmResponse.final_answer("I read every page of the manual; it is long.")
    ]


def reader(config: AgentConfig, llm: object, db: Path | None = None) -> AgentBuilder:
    builder = AgentBuilder("Read the manual").tool(read_page).config(config).llm(llm)  # type: ignore[arg-type]
    return builder.store(db) if db is not None else builder


LIMITED = AgentConfig(
    max_steps=30,
    reflect_every_n_steps=0,
    context_window=WINDOW,
    context_reserve=400,
    tool_output_max_lines=4,
)


def facts_of(db: Path, run_id: str) -> list[f.Fact]:
    store = SQLiteEventStore(db)
    try:
        return Trace.load(store, run_id).facts()
    finally:
        store.close()


def test_without_a_window_a_long_conversation_overflows_the_provider() -> None:
    config = LIMITED.model_copy(update={"context_window": None, "context_reserve": 0})
    engine = reader(config, SmallModel(pages(15))).build()
    with pytest.raises(AgentFailed, match="context_length_exceeded"):
        engine.run()


def test_a_long_conversation_compacts_finishes_and_replays(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    model = SmallModel(pages(15))
    engine = reader(LIMITED, model, db).build()
    assert engine.run() == "I read every page of the manual; it is long."
    assert max(model.counts) <= WINDOW and len(model.counts) == 16

    facts = facts_of(db, engine.run_id)
    reached = [x for x in facts if isinstance(x, f.ContextLimitReached)]
    cuts = [x for x in facts if isinstance(x, f.ContextCompacted)]
    assert reached and len(cuts) == len(reached)
    assert all(x.limit == WINDOW - 400 and x.provider is not None for x in reached)
    assert all(c.tokens_after <= c.limit < c.tokens_before for c in cuts)
    assert cuts[0].max_lines == 4 and cuts[0].truncated  # tier 1 first
    assert any(c.dropped is not None for c in cuts)  # then older steps went
    assert fold(facts) == engine.memory  # the cuts fold from the log as they happened
    note = engine.memory.history[0]
    assert note.is_summary and "dropped to fit the context window" in note.observation

    assert_replays(db, engine.run_id)  # served from the log: no provider, no tools


def test_branch_after_a_compaction_starts_from_the_cut_history(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = reader(LIMITED, SmallModel(pages(15)), db).build()
    engine.run()
    facts = facts_of(db, engine.run_id)
    seq = next(i for i, x in enumerate(facts, 1) if isinstance(x, f.ContextCompacted))
    at = seq + 2  # past the compaction's transition, before the next request
    parent_memory, _ = memory_at(db, engine.run_id, at)
    answer = LlmResponse.final_answer("Stopped early: the first pages were enough.")

    branch = branch_run(db, engine.run_id, at=at, llm_response=answer).run_id

    branched = facts_of(db, branch)
    assert isinstance(branched[-1], f.RunFinished) and branched[-1].final_answer == answer.content
    start, _ = memory_at(db, branch, at)
    assert start.history == parent_memory.history  # the cut, reproduced by the fold
    assert any(isinstance(x, f.ContextCompacted) for x in branched[:at])
    assert_replays(db, branch)


def test_the_estimate_uses_the_provider_count_recorded_for_the_last_call() -> None:
    usage = TokenUsage(input_tokens=900, output_tokens=5, cache_read_tokens=100)
    script = [
        LlmResponse.tool_call("read_page", {"n": 1}, usage=usage),
        LlmResponse.final_answer("The manual says little.", usage=usage),
    ]
    config = AgentConfig(context_window=100_000, reflect_every_n_steps=0)
    engine = reader(config, MockLlmCaller(script)).build()
    engine.run()
    memory = engine.memory
    assert memory.context_mark is not None
    counted, estimated_then = memory.context_mark
    assert counted == 1000  # input plus cached tokens: counted generously

    size = estimate_request(memory, engine.tools.schemas(), 100_000)
    assert size.provider == 1000 and size.fits
    assert size.tokens == 1000 + message_tokens(memory) - estimated_then

    unmarked = memory.model_copy(update={"context_mark": None})
    pure = estimate_request(unmarked, engine.tools.schemas())
    assert pure.provider is None and pure.limit is None and pure.fits
    assert pure.tokens == message_tokens(memory) + schema_tokens(engine.tools.schemas())
    assert "1000 counted by the provider" in repr(size)


def test_a_large_provider_count_makes_the_run_compact_early() -> None:
    big = TokenUsage(input_tokens=1900)
    script = [LlmResponse.tool_call("read_page", {"n": i}, usage=big) for i in (1, 2, 3)]
    script.append(LlmResponse.final_answer("Done reading three pages of it.", usage=big))
    config = AgentConfig(context_window=2000, reflect_every_n_steps=0, tool_output_max_lines=2)
    engine = reader(config, MockLlmCaller(script)).build()
    engine.run()
    reached = [x for x in engine.trace().facts() if isinstance(x, f.ContextLimitReached)]
    assert reached and reached[0].provider == 1900 and reached[0].tokens > 2000


def test_a_request_that_cannot_fit_fails_cleanly_before_calling(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    builder = reader(AgentConfig(context_window=50, context_reserve=10), MockLlmCaller([]), db)
    engine = builder.system_prompt("A very long system prompt. " * 20).build()
    with pytest.raises(AgentFailed, match="context window holds 40 \\(50 less the reserve"):
        engine.run()
    facts = facts_of(db, engine.run_id)
    kinds = [x.kind for x in facts]
    assert "LlmRequested" not in kinds  # nothing was sent
    assert "ContextLimitReached" not in kinds  # no history: nothing Reflecting could cut
    failed = next(x for x in facts if isinstance(x, f.RunFailed))
    assert failed.reason == "context_window" and "there is no history to cut" in failed.message


def entry(step: int, text: str, name: str = "read_page") -> HistoryEntry:
    return HistoryEntry(
        step=step, tool=ToolCall(name=name, id=f"c{step}"), observation=text, success=True
    )


def memory_with(history: list[HistoryEntry], max_lines: int = 3) -> AgentMemory:
    config = AgentConfig(context_window=10_000, tool_output_max_lines=max_lines)
    return AgentMemory(task="t", config=config, history=history)  # type: ignore[arg-type]


def test_tiers_cut_old_lines_then_old_steps_then_characters() -> None:
    long = "\n".join(f"line {i} " + "x" * 30 for i in range(30))
    memory = memory_with([entry(1, long), entry(2, long), entry(3, long)])
    full = estimate_request(memory, ()).tokens

    tier1 = compaction(memory, (), full - 10)
    assert tier1 is not None and tier1.truncated == (0, 1) and tier1.dropped is None
    cut = compacted(memory.history, tier1)
    assert cut[0].observation == cut_lines(long, 3) and cut[2].observation == long
    assert cut[0].observation.endswith("[... 27 more lines cut to fit the context window]")

    lines_cut = estimate_request(memory.model_copy(update={"history": cut}), ()).tokens
    tier2 = compaction(memory, (), lines_cut - 5)
    assert tier2 is not None and tier2.dropped == (0, 1)
    assert (
        tier2.note is not None and "tool call(s) of step 1 were dropped" in tier2.note.observation
    )
    kept = compacted(memory.history, tier2)
    assert [e.step for e in kept] == [1, 2, 3] and kept[0].is_summary

    tier3 = compaction(memory, (), 200)
    assert tier3 is not None and tier3.dropped == (0, 2) and tier3.max_chars is not None
    after = memory.model_copy(update={"history": compacted(memory.history, tier3)})
    assert estimate_request(after, ()).tokens == tier3.tokens_after <= 200
    assert compaction(memory, (), 5) is None  # not even the task fits: nothing is cut
    assert compaction(memory_with([]), (), 5) is None


def test_a_summary_at_the_head_of_history_is_kept() -> None:
    summary = entry(1, "the story so far", name="[SUMMARY]")
    long = "\n".join(["y" * 40] * 10)
    memory = memory_with([summary, entry(2, long), entry(3, long), entry(4, long)], 50)
    cut = compaction(memory, (), estimate_request(memory, ()).tokens - 50)
    assert cut is not None and cut.dropped == (1, 2)
    history = compacted(memory.history, cut)
    assert history[0] == summary and history[1].is_summary and history[2].step == 3


def test_small_helpers() -> None:
    assert estimate_tokens("") == 0 and estimate_tokens("abcde") == 2
    assert cut_lines("a\nb", 2) == "a\nb" and cut_chars("abc", 3) == "abc"
    assert cut_chars("abcdef", 2).startswith("ab[... 4 more characters")
    assert AgentConfig().context_limit() is None
    assert AgentConfig(context_window=100, context_reserve=30).context_limit() == 70
    assert AgentConfig(context_window=10).effective_safety_cap() == 7 * 15 + 10
    with pytest.raises(ValidationError, match="make the reserve smaller than the window"):
        AgentConfig(context_window=100, context_reserve=100)


def test_show_lists_the_compaction(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    engine = reader(LIMITED, SmallModel(pages(8)), db).build()
    engine.run()
    shown = subprocess.run(
        [sys.executable, "-m", "replay", "show", engine.run_id, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ},
        timeout=120,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "ContextLimitReached" in shown.stdout and "ContextCompacted" in shown.stdout
    assert "outputs cut to 4 lines" in shown.stdout


def test_periodic_reflection_does_not_send_a_summary_request_too_large() -> None:
    def script() -> list[LlmResponse]:
        return [
            LlmResponse.tool_call("records", {}, id="c1"),
            LlmResponse.final_answer("Page one says the manual goes on."),
        ]

    @tool
    def records() -> str:
        """The records, as JSON."""
        return json.dumps([{"name": f"n{i}", "value": str(i)} for i in range(60)])

    def agent(config: AgentConfig) -> AgentBuilder:
        return AgentBuilder("Read the manual").tool(records).config(config)

    plain = agent(AgentConfig(reflect_every_n_steps=0)).llm(MockLlmCaller(script())).build()
    plain.run()  # the history the reflection would summarise
    tools = plain.tools.schemas()
    planning = estimate_request(plain.memory, tools).tokens
    summary = estimate_request(compression_view(plain.memory), ()).tokens
    assert summary > planning + 20
    config = AgentConfig(context_window=planning + 20, reflect_every_n_steps=1)
    engine = agent(config).llm(MockLlmCaller(script())).build()
    assert engine.run() == "Page one says the manual goes on."
    facts = engine.trace().facts()
    skipped = [x for x in facts if isinstance(x, f.ReflectionSkipped)]
    assert len(skipped) == 1 and "summary request" in skipped[0].reason
    assert [x.purpose for x in facts if isinstance(x, f.LlmRequested)] == ["plan", "plan"]


windows = configs().map(
    lambda c: c.model_copy(
        update={
            "context_window": 450,
            "context_reserve": 0,
            "tool_output_max_lines": 2,
            "max_steps": 8,
            "reflect_every_n_steps": 0,
        }
    )
)


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(run=agent_runs(config=windows, behaviours=st.just(ToolBehaviour("success", LONG_OUTPUT))))
def test_generated_runs_with_a_small_window_keep_the_invariants(run: object) -> None:
    run.assert_invariants()  # type: ignore[attr-defined]


def test_a_branch_can_give_a_recorded_run_a_window_or_a_larger_one(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    unlimited = LIMITED.model_copy(update={"context_window": None, "context_reserve": 0})
    engine = reader(unlimited, MockLlmCaller(pages(12)), db).build()
    engine.run()
    stopped = branch_run(db, engine.run_id, at=3, config=LIMITED)  # a cut history: new requests
    assert stopped.status == "stopped" and stopped.needed[0].kind == "llm"
    narrowed = branch_run(db, engine.run_id, at=3, config=LIMITED, llm=MockLlmCaller(pages(12)))
    assert narrowed.status == "done" and not narrowed.needed
    assert {e.kind for e in narrowed.live} == {"llm"}  # the pages are read with the same args:
    assert {e.kind for e in narrowed.reused} == {"tool"}  # their recorded text is reused
    narrowed_id = narrowed.run_id
    facts = facts_of(db, narrowed_id)
    assert any(isinstance(x, f.ContextCompacted) for x in facts)
    assert isinstance(facts[-1], f.RunFinished) and facts[-1].status == "done"

    limited = facts_of(db, narrowed_id)
    seq = next(i for i, x in enumerate(limited, 1) if isinstance(x, f.ContextLimitReached))
    wider = LIMITED.model_copy(update={"context_window": 100_000})
    asked = sum(isinstance(x, f.LlmRequested) for x in limited[:seq])
    widened = branch_run(  # on the way to Reflecting
        db, narrowed_id, at=seq + 1, config=wider, llm=MockLlmCaller(pages(12)[asked:])
    ).run_id
    skipped = [x for x in facts_of(db, widened)[seq:] if isinstance(x, f.ReflectionSkipped)]
    assert skipped[0].reason == "the request fits the context window now"
    assert not any(isinstance(x, f.ContextCompacted) for x in facts_of(db, widened)[seq:])
